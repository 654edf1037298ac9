"""``paperclip serve`` with the concurrency model's knobs set on the command line: the alternatives measured.

The same app as ``python -m proxy serve`` (``commands/main.py``), except that
the memory pipeline's bounds (``pipeline/bounded_pipeline.py``: prepares and
records at once) and the interpreter's switch interval are the ones given,
so ``bench/load.py --variant`` can run them side by side with the real one.

    python bench/variant_proxy.py --config proxy.yaml --port 8788 --prepares 2 --records 2 --switch-ms 5
    python bench/variant_proxy.py --config proxy.yaml --port 8788 --unbounded
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn

from proxy import config
from proxy.pipeline import bounded_pipeline
from proxy.server.app import create_app

UNBOUNDED = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prepares", type=int, default=bounded_pipeline.PREPARES_AT_ONCE)
    parser.add_argument("--records", type=int, default=bounded_pipeline.RECORDS_AT_ONCE)
    parser.add_argument("--unbounded", action="store_true", help="no bound on prepares or records at once")
    parser.add_argument("--switch-ms", type=float, default=1.0, help="sys.setswitchinterval, in ms")
    args = parser.parse_args()
    # The bounds the app's BoundedPipeline is built with (its keyword defaults, read when it is made).
    defaults = bounded_pipeline.BoundedPipeline.__init__.__kwdefaults__
    assert defaults is not None
    defaults["prepares"] = UNBOUNDED if args.unbounded else args.prepares
    defaults["records"] = UNBOUNDED if args.unbounded else args.records
    app = create_app(config.load(args.config), freeze_heap=True)
    sys.setswitchinterval(args.switch_ms / 1000)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=30, server_header=False, date_header=False)


if __name__ == "__main__":
    main()
