"""An agent's tool loop: how often its memory block changes, and the proxy's CPU a round.

Usage (from the repo root, in its virtualenv)::

    python bench/agent_loop.py                         # this checkout
    python bench/agent_loop.py --compare ../before     # and another checkout's code, in turn, same loop

One user who has told the proxy a few facts asks one question, and an agent
answers it in ``--rounds`` rounds of tool calls and results (the chat API:
an assistant message with a tool call, a tool message with its result),
each round resending the conversation, as agents do. Every ``--learn-every``
rounds a fact is learnt elsewhere (the admin API adds one, as another chat's
extraction would). The context budgets are small, so compression takes the
loop's earlier rounds out of the window as it goes. The app runs in this
process (``httpx.ASGITransport``) before a scripted upstream (the eval's:
fixed replies, and summaries that are not JSON). Printed: how many rounds
forwarded a different memory block than the round before (each such change
breaks the client's prompt cache from the question's message on), and the
process's CPU time a round (``time.process_time``; the after-response work
drained each round, so it is counted). ``--compare DIR`` runs the same loop
with ``DIR``'s code (``PYTHONPATH``), the two builds in turn, ``--repeat``
times each.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
USER = "agent-user"
READY_POLLS = 2400  # two minutes
QUESTION = "Plan the food for my cat's trip to Oslo; check the weather tool first."
FACTS = ["My cat Zorblax is allergic to peanuts, please remember that.", "I live in Leeds with my partner Sam.",
         "I'm vegetarian and I cook every evening."]
LEARNT = ["Zorblax gets carsick on long drives.", "Sam is allergic to shellfish.", "I'm saving for a new car.",
          "Zorblax only eats wet food now.", "I work night shifts at the hospital.", "We have a second cat, Miso."]


async def loop(rounds: int, learn_every: int) -> dict[str, Any]:
    import httpx

    from proxy import config
    from proxy.eval.scenarios import ScriptedUpstream, memory_block
    from proxy.server.app import create_app

    with tempfile.TemporaryDirectory(prefix="paperclip-agent-loop-") as folder:
        settings = config.from_dict({
            "storage": {"url": f"sqlite:///{Path(folder) / 'loop.db'}"},
            "embedding": {"model": "hash"},
            "defaults": {
                "upstream": {"base_url": "http://upstream/v1", "api_key": "sk-up"},
                "compression": {"model": "fake-compressor"},
                "context": {"recent_window_tokens": 400, "summary_budget_tokens": 250},
            },
            "tenants": {"bench": {"api_keys": ["pk-bench"], "admin_keys": ["ak-bench"]}},
        }, env={})
        upstream = ScriptedUpstream()
        app = create_app(settings, transport=upstream.transport())
        async with app.router.lifespan_context(app):
            runtime = app.state.runtime
            for _ in range(READY_POLLS):  # the memory layer loads in the background
                if all(runtime.memory.checks().values()):
                    break
                await asyncio.sleep(0.05)
            http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://paperclip")
            headers = {"authorization": "Bearer pk-bench", "x-paperclip-user": USER}
            history: list[dict[str, Any]] = []
            for fact in FACTS:  # one earlier chat that told the facts
                history += [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
            history.append({"role": "user", "content": "Thanks, that is all."})
            await http.post("/v1/chat/completions", json={"model": "m", "messages": history}, headers=headers)
            await runtime.background.drain()
            messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
            blocks: list[str] = []
            cpu: list[float] = []
            for n in range(rounds):
                if n and n % learn_every == 0:
                    await http.post(f"/paperclip/v1/users/{USER}/memories",
                                    json={"content": LEARNT[(n // learn_every - 1) % len(LEARNT)]},
                                    headers={"authorization": "Bearer ak-bench"})
                started = time.process_time()
                got = await http.post("/v1/chat/completions", json={"model": "m", "messages": messages},
                                      headers={**headers, "x-paperclip-session": "the-task"})
                await runtime.background.drain()
                cpu.append(time.process_time() - started)
                got.raise_for_status()
                blocks.append(memory_block(upstream.chats[-1]))
                call = {"id": f"call_{n}", "type": "function",
                        "function": {"name": "weather", "arguments": json.dumps({"city": "Oslo", "day": n})}}
                messages += [{"role": "assistant", "content": f"Checking the weather, step {n}.", "tool_calls": [call]},
                             {"role": "tool", "tool_call_id": call["id"], "content": f"Day {n}: 12 degrees, dry."}]
            await http.aclose()
    changes = sum(1 for a, b in itertools.pairwise(blocks) if a != b)
    return {"rounds": rounds, "block_changes": changes, "distinct_blocks": len(set(blocks)),
            "cpu_ms_per_round": round(1000 * statistics.median(cpu), 2)}


def run_in(checkout: Path, args: argparse.Namespace) -> dict[str, Any]:
    """This loop with ``checkout``'s code, in a child process."""
    out = subprocess.run(
        [sys.executable, __file__, "--rounds", str(args.rounds), "--learn-every", str(args.learn_every), "--json"],
        env={**os.environ, "PYTHONPATH": str(checkout)}, cwd=checkout, capture_output=True, text=True, check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--learn-every", type=int, default=5)
    parser.add_argument("--compare", type=Path, default=None, help="another checkout, run in turn with this one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON line: this process's loop only")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(loop(args.rounds, args.learn_every))))
        return
    builds = {"this": ROOT, **({f"@{args.compare.name}": args.compare.resolve()} if args.compare else {})}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in builds}
    for _ in range(args.repeat):
        for name, checkout in builds.items():
            results[name].append(run_in(checkout, args))
    print(f"{args.rounds} rounds, a fact learnt every {args.learn_every}; medians of {args.repeat} runs")
    print("| build | block changes between rounds | distinct blocks | CPU a round (ms) |")
    print("|---|---|---|---|")
    for name, runs in results.items():
        print(f"| {name} | {statistics.median(r['block_changes'] for r in runs)} | "
              f"{statistics.median(r['distinct_blocks'] for r in runs)} | "
              f"{statistics.median(r['cpu_ms_per_round'] for r in runs)} |")


if __name__ == "__main__":
    main()
