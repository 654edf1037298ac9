"""Paperclip with its per-request accounting switched off: the "off" side of ``overhead.py --accounting``.

The same app as ``python -m proxy serve``, except that ``runtime.accounting``
(the log line, the usage ledger, the tenant/model metrics) does nothing, so
the difference between the two proxies in one run is what accounting costs.

    python bench/quiet_proxy.py --config proxy.yaml --port 8788
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn

from proxy import config
from proxy.server.app import create_app
from proxy.server.usage_ledger import UsageLedger


class Silent:
    ledger = UsageLedger()

    def finish(self, done: Any) -> None:
        return None

    async def flush(self, store: Any) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = create_app(config.load(args.config), accounting=Silent())  # type: ignore[arg-type]
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                server_header=False, date_header=False)


if __name__ == "__main__":
    main()
