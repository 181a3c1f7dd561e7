"""Estimated cost per call: USD per million tokens, overridable by the user.

Override with a JSON file named by KFORGE_PRICES: {"model-name": [input_usd_per_mtok,
output_usd_per_mtok], ...}. Unknown models cost None ("n/a"), never a guess.
"""
from __future__ import annotations

import json
import os

PRICES = {  # USD per million input / output tokens (public list prices)
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-opus-4-5": (5.0, 25.0),
}


def price_table() -> dict[str, tuple[float, float]]:
    table = dict(PRICES)
    path = os.environ.get("KFORGE_PRICES")
    if path:
        table.update({k: tuple(v) for k, v in json.loads(open(path).read()).items()})
    return table


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    table = price_table()
    price = table.get(model) or next((p for name, p in table.items() if model.startswith(name)),
                                     None)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1e6
