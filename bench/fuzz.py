"""10,000 fuzzed requests and 2,000 fuzzed upstream replies against a real ``paperclip serve``.

How many 500s of the proxy's own making?

Usage (from the repo root, in its virtualenv)::

    python bench/fuzz.py                  # 10,000 requests + 2,000 replies, memory on, hash embedder
    python bench/fuzz.py -n 2000 --replies 500 --embedding bundled

The inputs are the fuzz suite's (``tests/fuzz_inputs.py``: chat bodies with
lone surrogates, deep nesting, huge integers, bad UTF-8, odd parts and tool
calls; paths with control characters and encoded slashes; admin calls), drawn
by hypothesis, a third of each kind. The upstream is the test suite's fake
(``tests/fake_upstream.py``) on loopback, which never answers 500 to what the
proxy forwards, so every 500 is the proxy's. Reported: requests, 500s, errors
outside the envelope, other statuses, and whether the proxy is alive after.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TypeVar

import httpx
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from overhead import free_port, start, wait_ready, wait_until_up  # noqa: E402

from tests.conftest import ADMIN_KEY, PROXY_KEY, UPSTREAM_KEY  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fuzz_inputs import (  # noqa: E402
    Probe,
    Reply,
    admin_probes,
    chat_probes,
    hostile_tenant,
    judge,
    judge_reply,
    path_probes,
    send,
    send_for_reply,
    upstream_replies,
)
from tests.hostile_upstream import HostileUpstream  # noqa: E402
from tests.servers import ServerThread  # noqa: E402

T = TypeVar("T")


def config(tmp: Path, upstream_url: str, hostile_url: str, port: int, embedding: str) -> Path:
    raw = {
        "server": {"host": "127.0.0.1", "port": port},
        "storage": {"url": f"sqlite:///{tmp / 'fuzz.db'}"},
        "embedding": {"model": embedding},
        "defaults": {"upstream": {"base_url": upstream_url, "api_key": UPSTREAM_KEY},
                     "compression": {"model": "fake-compressor"}},
        "tenants": {"acme": {"api_keys": [PROXY_KEY], "admin_keys": [ADMIN_KEY]},
                    "hostile": hostile_tenant(upstream_url, hostile_url)},
    }
    path = tmp / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


Outcome = tuple[int | str, str | None]  # a status (or what the client raised), and the problem found if any


def run(url: str, n: int, drawn: st.SearchStrategy[T], exchange: Callable[[httpx.Client, T], Outcome]) -> dict[str, object]:
    """``n`` examples of ``drawn``, each ``exchange``d with the proxy: the outcomes and the problems found."""
    outcomes: collections.Counter[int | str] = collections.Counter()
    problems: list[str] = []
    client = httpx.Client(base_url=url, timeout=60)

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(example=drawn)
    def one(example: T) -> None:
        outcome, problem = exchange(client, example)
        outcomes[outcome] += 1
        if problem is not None:
            problems.append(problem)

    started = time.perf_counter()
    one()
    alive = client.get("/healthz").status_code == 200
    client.close()
    return {
        "examples": sum(outcomes.values()),
        "seconds": round(time.perf_counter() - started, 1),
        "proxy_500s": outcomes[500],
        "problems": len(problems),
        "first_problems": problems[:5],
        "outcomes": {str(k): v for k, v in sorted(outcomes.items(), key=str)},
        "alive_after": alive,
    }


def client_request(client: httpx.Client, probe: Probe) -> Outcome:
    response = send(client, probe)
    return response.status_code, judge(probe, response)


def upstream_reply(playing: list[Reply]) -> Callable[[httpx.Client, Reply], Outcome]:
    def exchange(client: httpx.Client, reply: Reply) -> Outcome:
        playing[:] = [reply]  # what the hostile upstream answers
        response, error = send_for_reply(client, reply)
        return response.status_code if response is not None else type(error).__name__, judge_reply(reply, response, error)

    return exchange


def failures(log: Path, limit: int = 3) -> str:
    """The first ``limit`` exceptions the proxy logged, each with its traceback."""
    blocks = log.read_text(errors="replace").split("\nTraceback (most recent call last):")[1:]
    return "\n\n".join("Traceback (most recent call last):" + b.split("\n20")[0] for b in blocks[:limit])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=10_000, help="fuzzed client requests")
    parser.add_argument("--replies", type=int, default=2_000, help="fuzzed upstream replies")
    parser.add_argument("--embedding", default="hash")
    args = parser.parse_args(argv)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        fake = FakeUpstream()
        upstream = stack.enter_context(ServerThread(fake.app()))
        playing: list[Reply] = []
        hostile = stack.enter_context(HostileUpstream(lambda request: playing[0].steps))
        port = free_port()
        cfg = config(tmp, upstream.url + "/v1", hostile.base_url, port, args.embedding)
        proxy = start(stack, [sys.executable, "-m", "proxy", "serve", "--config", str(cfg)], tmp / "proxy.log")
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/healthz", proxy, "paperclip", 60, tmp / "proxy.log")
        wait_ready(url + "/readyz", 300)
        results = {
            "client_requests": run(url, args.n, st.one_of(chat_probes(), path_probes(), admin_probes()), client_request),
            "upstream_replies": run(url, args.replies, upstream_replies(), upstream_reply(playing)),
        }
        print(json.dumps(results, indent=2))
        if any(r["proxy_500s"] for r in results.values()):  # the log goes with the temporary folder: show why now
            print(failures(tmp / "proxy.log"), file=sys.stderr)
        clean = all(r["proxy_500s"] == 0 and r["problems"] == 0 and r["alive_after"] for r in results.values())
        return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
