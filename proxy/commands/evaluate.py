"""``paperclip eval locomo PATH`` and ``paperclip eval scenarios [PATH]``: the command line of the evals."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import Any

DATASETS = ("locomo", "scenarios")


def _flag(name: str) -> str:
    return "--no-record-questions" if name == "record_questions" else "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=DATASETS, help="the data set format")
    parser.add_argument("path", nargs="?", default=None,
                        help="a LoCoMo-format JSON file; for scenarios, a scenario file (default: the packaged suite)")
    parser.add_argument("--mode", choices=("sessions", "one-chat"), default="sessions",
                        help="locomo: each session a chat of its own, sent once (sessions), or the whole conversation one "
                             "chat, sent at every user turn (one-chat)")
    parser.add_argument("--clock", choices=("dated", "burst"), default="dated",
                        help="locomo: each session at its date (dated), or the whole history as fast as it "
                             "comes, at the present time (burst)")
    parser.add_argument("--model", choices=("rules", "observations"), default="rules",
                        help="locomo: the compression model's stand-in — replies that are not JSON, so the rules "
                             "extract (rules), or the data set's own facts in the extraction prompt's JSON and "
                             "its session summaries (observations)")
    parser.add_argument("--limit-convs", type=int, default=None, metavar="N", help="locomo: the first N conversations")
    parser.add_argument("--convs", default=None, metavar="IDS",
                        help="locomo: only these conversations, by sample_id, comma-separated (e.g. conv-26,conv-30)")
    parser.add_argument("--embedder", default="bundled", help="embedding.model: bundled (default), hash, or a model")
    parser.add_argument("--top-k", type=int, default=None, help="locomo: memory.top_k (default: the config default)")
    parser.add_argument("--budget", type=int, default=None, help="locomo: memory.budget_tokens")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--md", default=None, help="write the tables as Markdown here")
    parser.add_argument("--no-record-questions", dest="record_questions", action="store_false",
                        help="locomo: prepare each question without recording it (a memory that never sees a question)")
    parser.add_argument("--together", action="store_true",
                        help="locomo: replay the conversations at once, one request of each in turn (the users of a "
                             "busy proxy), then ask each one's questions")
    parser.add_argument("--report", default=None, metavar="DIR", help="write an HTML report with plots here")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--api", choices=("chat", "responses", "messages"), default="chat",
                        help="send the turns as chat completions, through the Responses API (scenarios) "
                             "or as Anthropic Messages requests (locomo)")
    parser.add_argument("--part", choices=("all", "tuning", "frozen"), default="all",
                        help="scenarios: both halves (default), the tuning half, or the frozen half; the frozen "
                             "half and the tuning cases that say what a model extracts are replayed with the rules "
                             "and with a model stand-in that follows the prompts")
    parser.set_defaults(option_defaults={name: parser.get_default(name) for name in (*LOCOMO_ONLY, *SCENARIOS_ONLY)})


# The options one data set's replay reads and the other's does not: given to the other, they are refused
# rather than ignored (a run of the whole suite that looks as if they were applied).
LOCOMO_ONLY = ("mode", "clock", "model", "limit_convs", "convs", "top_k", "budget", "record_questions", "together")
SCENARIOS_ONLY = ("part",)


def eval_command(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    other = "scenarios" if args.dataset == "locomo" else "locomo"
    given = [name for name in (SCENARIOS_ONLY if other == "scenarios" else LOCOMO_ONLY)
             if getattr(args, name) != args.option_defaults[name]]
    if given:
        flags = ", ".join(_flag(name) for name in given)
        print(f"paperclip eval {args.dataset}: {flags} is for {other}", file=sys.stderr)
        return 2
    if args.dataset == "scenarios":
        return scenarios_command(args)
    if args.path is None:
        print("paperclip eval locomo: a LoCoMo-format JSON file is required", file=sys.stderr)
        return 2
    return locomo_command(args)


def scenarios_command(args: argparse.Namespace) -> int:
    import json

    from tqdm import tqdm

    from ..eval import scenarios

    suite = scenarios.load(args.path)
    bar = tqdm(total=scenarios.steps(suite, args.part), file=sys.stderr, disable=args.no_progress, unit="case",
               desc="scenarios")
    with bar:
        results = asyncio.run(scenarios.run(suite, args.embedder, bar.update, args.api, args.part))
    text = scenarios.markdown(results)
    print(text)
    if args.out:
        rows = [r.__dict__ for r in results]
        data = {"summary": scenarios.summary(results), "summary_model": scenarios.summary(results, "model"),
                "frozen": scenarios.frozen_summary(results), "results": rows}
        Path(args.out).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.md:
        Path(args.md).write_text(text + "\n", encoding="utf-8")
    if args.report:
        from ..eval.scenarios_page import write_report

        print(f"report: {write_report(args.report, results)}")
    return 0


def locomo_command(args: argparse.Namespace) -> int:
    # Imported here: loading the pipeline pulls in torch.
    from tqdm import tqdm

    from ..eval import locomo, report
    from ..eval.harness import Options
    from ..eval.replay import run, total_steps

    try:
        conversations = locomo.select(locomo.load(args.path), args.convs)[: args.limit_convs]
    except ValueError as error:
        print(f"paperclip eval locomo: {error}", file=sys.stderr)
        return 2
    memory: dict[str, Any] = {}
    if args.top_k is not None:
        memory["top_k"] = args.top_k
    if args.budget is not None:
        memory["budget_tokens"] = args.budget
    if args.api == "responses":
        print("paperclip eval locomo: --api is chat or messages", file=sys.stderr)
        return 2
    options = Options(mode=args.mode, embedder=args.embedder, memory=memory,
                      record_questions=args.record_questions, api=args.api, clock=args.clock, model=args.model,
                      together=args.together)
    bar = tqdm(total=total_steps(conversations, options), file=sys.stderr, disable=args.no_progress,
               unit="req", desc=f"eval {args.mode} {args.clock} {args.model}")
    started = time.perf_counter()
    with bar:
        answers, stats = asyncio.run(run(conversations, options, bar.update))
    from ..config import from_dict

    defaults = from_dict({"defaults": {"memory": memory}}, env={}).defaults.memory
    meta = {
        "dataset": "locomo",
        "file": Path(args.path).name,
        "mode": args.mode,
        "clock": args.clock,
        "model": args.model,
        "embedder": args.embedder,
        "record_questions": args.record_questions,
        "api": args.api,
        "together": args.together,
        "conversations": len(conversations),
        "top_k": defaults.top_k,
        "budget_tokens": defaults.budget_tokens,
        "weights": [defaults.vector_weight, defaults.bm25_weight],
        "seconds": round(time.perf_counter() - started, 1),
    }
    summary = report.summarise(answers)
    print(report.markdown(meta, stats, summary))
    if args.out:
        report.write_json(args.out, meta, stats, summary, answers)
    if args.md:
        Path(args.md).write_text(report.markdown(meta, stats, summary), encoding="utf-8")
    if args.report:
        from ..eval.page import write_report

        print(f"report: {write_report(args.report, meta, stats, summary)}")
    return 0
