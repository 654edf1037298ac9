"""``paperclip config check|reference``: validate a config file, print the reference of every key.

``load_settings`` is how every command that serves or reads the database
finds and reads its config: a problem is printed, one line each, and the
command exits with status 2 before anything starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .. import config
from ..config.reference import render
from ..errors import ConfigError
from . import banner

CONFIG_HELP = f"config file (default: ${config.CONFIG_ENV}, else ./proxy.yaml, else the built-in one)"


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("config", help="check a config file, or print the configuration reference")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="validate a config file: every problem, then exit 2; else a summary")
    check.add_argument("--config", default=None, help=CONFIG_HELP)
    actions.add_parser("reference", help="print every key with its default and meaning (Markdown)")


def run(args: argparse.Namespace) -> int:
    if args.action == "reference":
        sys.stdout.write(render())
        return 0
    settings = load_settings(args.config)
    names = ", ".join(t.name for t in settings.tenants) or "none"
    print(f"{settings.source}: valid; tenants: {names}; passthrough_keys {'on' if settings.passthrough_keys else 'off'}")
    for level, line in banner.lines(settings):  # what serve would warn of at start
        if level >= logging.WARNING:
            print(f"warning: {line}", file=sys.stderr)
    return 0


def load_settings(explicit: str | None) -> config.Settings:
    """The settings of ``--config``, ``$PAPERCLIP_CONFIG``, ``./proxy.yaml`` or the embedded file; exit 2 on a problem."""
    try:
        return config.load(config.find_file(explicit))
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"paperclip: config error: {problem}", file=sys.stderr)
        raise SystemExit(2) from exc
