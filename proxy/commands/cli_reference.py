"""docs/reference/cli.md, generated from the ``paperclip`` parser itself so that it cannot drift.

    python -m proxy.commands.cli_reference > docs/reference/cli.md

Every command and subcommand gets a section: its usage line, what it does
(the parser's help) and a table of its arguments with their defaults.
"""

from __future__ import annotations

import argparse
import sys

from .main import build_parser

HEADER = """# Command line reference: `paperclip`

Generated from the command's own parser: do not edit by hand; regenerate with
`python -m proxy.commands.cli_reference > docs/reference/cli.md` (a test
checks that this file is what the parser generates). `python -m proxy` is the
same command. Every command that reads the config finds it as `serve` does:
`--config`, else `$PAPERCLIP_CONFIG`, else `./proxy.yaml`, else the built-in
one; a config problem is printed, one line each, and the command exits with
status 2.
"""


def render() -> str:
    parser = build_parser()
    parts = [HEADER, *_sections(parser, "paperclip", parser.description or "")]
    return "\n".join(parts)


def _sections(parser: argparse.ArgumentParser, name: str, help_text: str) -> list[str]:
    out = [_section(parser, name, help_text)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for sub_name, sub in action.choices.items():
                out += _sections(sub, f"{name} {sub_name}", helps.get(sub_name, ""))
    return out


def _section(parser: argparse.ArgumentParser, name: str, help_text: str) -> str:
    level = "#" * min(2 + name.count(" ") - 1, 4) if " " in name else "##"
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    lines = [f"{level} `{name}`", "", help_text.strip() or "", "", "```", usage, "```", ""]
    rows = [_row(action) for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    rows = [row for row in rows if row]
    if rows:
        lines += ["| argument | default | meaning |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(line for line in lines if line is not None)


def _row(action: argparse.Action) -> str:
    if isinstance(action, argparse._SubParsersAction):
        commands = ", ".join(f"`{choice}`" for choice in action.choices)
        return f"| command | | one of {commands} |"
    if action.option_strings:
        flag = ", ".join(action.option_strings)
        if action.nargs != 0:
            flag += f" {action.metavar or action.dest.upper()}"
    else:
        flag = str(action.metavar or action.dest)
    meaning = (action.help or "").replace("|", "\\|")
    if action.choices is not None:
        meaning = (meaning + "; " if meaning else "") + "one of " + ", ".join(f"`{c}`" for c in action.choices)
    return f"| `{flag}` | {_default(action)} | {meaning} |"


def _default(action: argparse.Action) -> str:
    if isinstance(action, argparse._VersionAction) or action.default in (None, argparse.SUPPRESS):
        return ""
    if action.nargs == 0:  # a switch
        return ""
    return f"`{action.default}`"


if __name__ == "__main__":
    sys.stdout.write(render())
