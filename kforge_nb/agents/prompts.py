"""Prompt templates (Jinja2), overridable by the user.

Lookup order for a template `NAME.j2` at iteration N:
  1. `NAME.iterN.j2` in the user's prompt folder (`--prompts DIR`), then in the package;
  2. `NAME.j2` in the user's folder, then the package's.
To add to a built-in prompt instead of replacing it, put the text in `NAME.append.md` or
`NAME.iterN.append.md` in the prompt folder (or pass it as `append[NAME]` / `append["NAME.iterN"]`):
it goes at the end of the rendered prompt.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2

PACKAGE_TEMPLATES = Path(__file__).parent / "prompts"


@dataclass
class Prompts:
    folder: str | Path | None = None
    append: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        folders = [str(self.folder)] if self.folder else []
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([*folders, str(PACKAGE_TEMPLATES)]),
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
            autoescape=False)

    def render(self, name: str, iteration: int = 0, **context) -> str:
        try:
            template = self.env.get_template(f"{name}.iter{iteration}.j2")
        except jinja2.TemplateNotFound:
            template = self.env.get_template(f"{name}.j2")
        text = template.render(**context).strip() + "\n"
        for key in (name, f"{name}.iter{iteration}"):
            extra = self.append.get(key) or self._append_file(key)
            if extra:
                text += "\n" + extra.strip() + "\n"
        return text

    def _append_file(self, key: str) -> str:
        path = Path(self.folder) / f"{key}.append.md" if self.folder else None
        return path.read_text() if path and path.is_file() else ""
