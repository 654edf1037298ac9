"""A user's export and its traces, by ``traces.candidates``: bytes in all and per request.

Replays one LoCoMo-format conversation as one chat, the way a client sends
it (the whole history on every request, ``speaker_a`` as the user), through
the real proxy on loopback in front of the fake upstream (the compression
model answers at once), with the bundled embedder; then exports the user
through the admin API and weighs the export and its traces. One fresh
database per ``traces.candidates`` value, the same conversation each time.

    python bench/export_size.py LOCOMO.json [--conv conv-26] [--candidates 50,20,0]

LoCoMo is CC BY-NC 4.0: it is read from the path given, never copied into the repo.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.compression import MODEL, ModelCalls, fake_model, locomo, requests_of  # noqa: E402
from proxy import config  # noqa: E402
from proxy.server.app import create_app  # noqa: E402
from tests.servers import ServerThread  # noqa: E402

KEY, ADMIN = "pk-bench", "ak-bench"
USER = "bench-user"


async def settle(proxy: ServerThread, app: Any) -> None:
    """Until the requests in flight and their after-response work (recording, compression) are done."""
    handlers = proxy.server.server_state.tasks
    while handlers or app.state.runtime.background.pending:
        if handlers:
            await asyncio.wait(set(handlers))
        await app.state.runtime.background.drain()


def weigh(messages: list[dict[str, Any]], candidates: int, folder: Path) -> dict[str, Any]:
    upstream = ServerThread(fake_model(0.0, ModelCalls(), None).app()).start()
    raw = {
        "storage": {"url": f"sqlite:///{folder / f'export-{candidates}.db'}"},
        "traces": {"candidates": candidates},
        "defaults": {
            "upstream": {"base_url": upstream.url + "/v1", "api_key": "sk-bench"},
            "compression": {"model": "fake-compressor"},
        },
        "tenants": {"bench": {"api_keys": [KEY], "admin_keys": [ADMIN]}},
    }
    app = create_app(config.from_dict(raw, env={}))
    proxy = ServerThread(app).start()
    try:
        with httpx.Client(base_url=proxy.url, timeout=120) as http:
            while http.get("/readyz").status_code != 200:
                time.sleep(0.05)
            sent = requests_of(messages)
            for n in sent:
                http.post(
                    "/v1/chat/completions", json={"model": MODEL, "messages": messages[:n]},
                    headers={"authorization": f"Bearer {KEY}", "x-paperclip-user": USER},
                ).raise_for_status()
                proxy.call(settle(proxy, app), timeout=600)
            export = http.get(f"/paperclip/v1/users/{USER}/export", headers={"authorization": f"Bearer {ADMIN}"})
            export.raise_for_status()
    finally:
        proxy.stop()
        upstream.stop()
    data = export.json()
    # The export's own bytes, less those of the same document without its traces, written alike.
    bare = json.dumps({**data, "traces": []}, ensure_ascii=False, separators=(",", ":")).encode()
    traces = len(export.content) - len(bare)
    return {
        "candidates": candidates,
        "requests": len(sent),
        "export_bytes": len(export.content),
        "trace_bytes": traces,
        "trace_bytes_per_request": round(traces / max(len(data["traces"]), 1)),
        "traces": len(data["traces"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--conv", default="conv-26", help="the conversation's sample_id")
    parser.add_argument("--candidates", default="50,20,0", help="traces.candidates values, comma-separated")
    args = parser.parse_args(argv)
    messages = dict(locomo(args.data))[args.conv]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for value in (int(v) for v in args.candidates.split(",")):
            rows.append(weigh(messages, value, Path(folder)))
            print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"{args.conv}: {len(messages)} messages, one chat, the bundled embedder\n")
    print("| traces.candidates | requests | export | traces | trace per request |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['candidates']} | {r['requests']} | {r['export_bytes'] / 1e6:.2f} MB | "
              f"{r['trace_bytes'] / 1e6:.2f} MB | {r['trace_bytes_per_request'] / 1e3:.1f} KB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
