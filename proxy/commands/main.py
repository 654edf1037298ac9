"""``paperclip`` — serve the proxy, manage memories, move the data to PostgreSQL, run the eval, check the config."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .. import __version__
from ..server import requestlog
from . import banner, config_commands, migrate
from . import evaluate as eval_cli
from . import memories as memories_cli
from .config_commands import CONFIG_HELP, load_settings

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def build_parser() -> argparse.ArgumentParser:
    """Every command and flag of ``paperclip``: what ``main`` parses and docs/reference/cli.md lists."""
    parser = argparse.ArgumentParser(prog="paperclip", description=__doc__)
    parser.add_argument("--version", action="version", version=f"paperclip {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", default=None, help=CONFIG_HELP)
    serve.add_argument("--host", default=None, help="address to listen on (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to listen on (default: server.port, 8787)")
    serve.add_argument(
        "--log-level", default="info", type=str.lower, choices=LOG_LEVELS, help="least severe level logged (default: info)"
    )
    memories_cli.add_parser(sub)
    migrate.add_parser(sub)
    config_commands.add_parser(sub)
    eval_cli.add_arguments(sub.add_parser("eval", help="replay a data set: recall, tokens, compression"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve_command(args)
    if args.command == "memories":
        return memories_cli.run(args, load_settings(args.config))
    if args.command == "migrate":
        return migrate.run(args)
    if args.command == "config":
        return config_commands.run(args)
    if args.command == "eval":
        return eval_cli.eval_command(args)
    parser.error(f"unknown command {args.command}")
    return 2


# One event loop serves every socket while worker threads run what lets go of it (embeddings,
# SQLite, large bodies) and Python around it. At the interpreter's default, a thread holding the
# GIL keeps it for 5 ms before the loop gets its turn; 1 ms keeps /healthz and every stream's next
# chunk prompt while they work (docs/decisions/0012-one-event-loop.md has the measurements).
SWITCH_INTERVAL_S = 0.001


def serve_command(args: argparse.Namespace) -> int:
    import uvicorn

    from ..server.app import create_app
    from ..server.header_timeout import header_timeout_protocol

    settings = load_settings(args.config)
    requestlog.configure(settings.server, args.log_level)
    log = logging.getLogger("paperclip")
    for level, line in banner.lines(settings):
        log.log(level, line)
    app = create_app(settings, freeze_heap=True)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    uvicorn.run(
        app,
        host=args.host or settings.server.host,
        port=args.port or settings.server.port,
        log_level=args.log_level,
        log_config=None,  # uvicorn's loggers go through requestlog's handler, in server.log_format
        access_log=False,
        timeout_graceful_shutdown=30,
        timeout_keep_alive=settings.server.keep_alive_s,
        http=header_timeout_protocol(settings.server.header_timeout_s),
        # The upstream's own Date and Server headers pass through; uvicorn's would duplicate them.
        server_header=False,
        date_header=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
