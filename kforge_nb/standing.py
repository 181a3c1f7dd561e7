"""The words of a prompt that a measurement decides (agents/history.py writes them)."""
from __future__ import annotations

import re

# What a measurement decides: which candidate was kept, which is the best now. Two runs of one
# session time their candidates differently, so these words (and the sentences and the section
# that are there only when nothing was kept) differ where the code does not. A replay compares
# prompts without them (providers/recording.normalised); every such phrase agents/history.py
# writes is matched here (tests/test_history.py flips each standing and compares).
STANDING_WORDS = re.compile(r"kept as the best|not kept|the best so far"
                            r"|not the best now; the search expands it too")
STANDING_TEXT = re.compile(r"; the best now| Earlier changes to it were not kept: [^\n]*"
                           r"|\n## Why you see \S+ again\n.*?(?=\n## |\Z)", re.S)


def without_standing(text: str) -> str:
    """`text` with the words a measurement decided replaced by `~` and the sentences it decided
    left out."""
    return STANDING_WORDS.sub("~", STANDING_TEXT.sub("", text))
