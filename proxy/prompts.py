"""Prompt templates: files in ``prompts/``, loaded once at start, rendered per call.

Syntax. A placeholder is ``{name}`` where name is a lowercase identifier
(``[a-z][a-z0-9_]*``). Every other character is literal, braces included, so
JSON examples (``{"type": "event"}``) need no escaping — and there is no
escape for a literal ``{name}``. A file's variables are exactly the
placeholders it contains. Rendering fails loudly: a missing variable, an
unknown one, or an unknown template raises ``PromptError``. Values are
substituted in a single pass, so a value that itself contains ``{name}`` (a
transcript quoting code) is never expanded.

Location. ``Prompts.load()`` without a folder reads ``prompts/`` beside the
``proxy`` package directory (the repository root in a checkout or an editable
install), else ``proxy/_prompts`` inside the package, for a build that ships
them as package data; a folder counts only if it holds ``summarize.md``. The prompt files and their variables are a public
contract: tests/test_prompts.py renders every one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import PromptError

_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_PACKAGE_DIR = Path(__file__).resolve().parent



def default_folders() -> tuple[Path, ...]:
    """Where ``Prompts.load()`` looks, in order."""
    return (_PACKAGE_DIR.parent / "prompts", _PACKAGE_DIR / "_prompts")


@dataclass(frozen=True)
class Template:
    name: str
    source: str  # the file it came from, for error messages
    text: str
    variables: frozenset[str]

    @classmethod
    def parse(cls, name: str, source: str, text: str) -> Template:
        return cls(name, source, text, frozenset(_PLACEHOLDER.findall(text)))

    def render(self, values: Mapping[str, str | int]) -> str:
        missing = sorted(self.variables - values.keys())
        unknown = sorted(values.keys() - self.variables)
        if missing:
            raise PromptError(self.source, ", ".join(missing), "missing variable")
        if unknown:
            raise PromptError(self.source, ", ".join(unknown), "unknown variable")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


class Prompts:
    """The loaded templates, by file stem (``summarize`` for ``summarize.md``)."""

    def __init__(self, templates: Mapping[str, Template]) -> None:
        self._templates = dict(templates)

    @classmethod
    def load(cls, folder: str | Path | None = None) -> Prompts:
        """Read every ``*.md`` file of ``folder`` (default: see the module docstring)."""
        path = _resolve(folder)
        files = sorted(path.glob("*.md"))
        if not files:
            raise PromptError(str(path), "prompts", "no *.md prompt files in this folder")
        return cls({f.stem: Template.parse(f.stem, str(f), _read(f)) for f in files})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._templates))

    def variables(self, name: str) -> frozenset[str]:
        return self._template(name).variables

    def render(self, name: str, **values: str | int) -> str:
        return self._template(name).render(values)

    def require(self, name: str, variables: set[str] | frozenset[str]) -> None:
        """Fail at start, not mid-request, if a template is absent or has other variables."""
        declared = self._template(name).variables
        if declared != variables:
            problem = f"expected variables {sorted(variables)}, the file has {sorted(declared)}"
            raise PromptError(self._template(name).source, name, problem)

    def _template(self, name: str) -> Template:
        template = self._templates.get(name)
        if template is None:
            raise PromptError("prompts", name, f"no such prompt (have: {', '.join(self.names)})")
        return template


def _resolve(folder: str | Path | None) -> Path:
    if folder is not None:
        path = Path(folder)
        if not path.is_dir():
            raise PromptError(str(path), "prompts", "not a folder")
        return path
    for candidate in default_folders():
        # site-packages/prompts could belong to another distribution: check it is ours.
        if (candidate / "summarize.md").is_file():
            return candidate
    looked = " or ".join(str(p) for p in default_folders())
    raise PromptError(looked, "prompts", "prompt folder not found")


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(str(file), "prompts", f"cannot read: {exc}") from exc
