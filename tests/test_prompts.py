"""Prompt files are a public contract: every file in prompts/ renders, and rendering fails loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.errors import ConfigError, PromptError
from proxy.prompts import Prompts, Template, default_folders

REPO_PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
PROMPT_FILES = sorted(REPO_PROMPTS.glob("*.md"))


def test_the_default_folder_is_the_repos_prompts() -> None:
    assert default_folders()[0] == REPO_PROMPTS
    assert Prompts.load().names == tuple(f.stem for f in PROMPT_FILES)


@pytest.mark.parametrize("path", PROMPT_FILES, ids=lambda p: p.name)
def test_every_prompt_file_renders_with_its_variables(path: Path) -> None:
    prompts = Prompts.load(REPO_PROMPTS)
    variables = prompts.variables(path.stem)
    values = {name: f"<<{name}>>" for name in variables}
    text = prompts.render(path.stem, **values)
    for name in variables:
        assert f"<<{name}>>" in text
        assert "{" + name + "}" not in text


@pytest.mark.parametrize("path", PROMPT_FILES, ids=lambda p: p.name)
def test_every_prompt_file_fails_on_a_missing_variable(path: Path) -> None:
    prompts = Prompts.load(REPO_PROMPTS)
    variables = sorted(prompts.variables(path.stem))
    if not variables:
        pytest.skip("no variables")
    values = {name: "x" for name in variables[1:]}
    with pytest.raises(PromptError, match=variables[0]):
        prompts.render(path.stem, **values)


def test_the_compression_prompts_declare_their_contract() -> None:
    prompts = Prompts.load(REPO_PROMPTS)
    assert prompts.variables("summarize") == {"first_turn", "last_turn", "transcript"}
    assert prompts.variables("merge") == {"first_turn", "last_turn", "summaries"}
    text = prompts.render("summarize", first_turn=12, last_turn=40, transcript="T")
    assert 'Start with "Turns 12–40:"' in text
    for rule in ("Never add a fact", "verbatim", "number", "date", "amount", "constraint"):
        assert rule in text


def test_unknown_variables_and_templates_raise() -> None:
    prompts = Prompts.load(REPO_PROMPTS)
    values: dict[str, str | int] = {"first_turn": 1, "last_turn": 2, "transcript": "t"}
    with pytest.raises(PromptError, match="unknown variable"):
        prompts.render("summarize", **values, extra="x")
    with pytest.raises(PromptError, match="no such prompt"):
        prompts.render("nope")
    assert issubclass(PromptError, ConfigError)  # the CLI reports it and exits 2


def test_values_are_substituted_once_and_other_braces_are_literal() -> None:
    template = Template.parse("t", "t.md", 'JSON {"type": "event"} {x} {X} {} {y}')
    assert template.variables == {"x", "y"}
    assert template.render({"x": "{y}", "y": 7}) == 'JSON {"type": "event"} {y} {X} {} 7'


def test_loading_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="not a folder"):
        Prompts.load(tmp_path / "missing")
    with pytest.raises(PromptError, match=r"no \*\.md prompt files"):
        Prompts.load(tmp_path)
    (tmp_path / "summarize.md").write_text("{a}", encoding="utf-8")
    prompts = Prompts.load(tmp_path)
    with pytest.raises(PromptError, match="expected variables"):
        prompts.require("summarize", {"b"})
    with pytest.raises(PromptError, match="no such prompt"):
        prompts.require("merge", {"b"})
