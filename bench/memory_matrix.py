"""The memory eval's every combination, and its table: mode × clock × model × half.

    python bench/memory_matrix.py PATH --dir DIR [--lock FILE]
        [--half A=conv-26,conv-30 --half B=conv-41,conv-42]
        [--modes sessions,one-chat] [--clocks dated,burst] [--models rules,observations]
        [--embedder bundled] [--md TABLE.md] [--rerun]

PATH is a LoCoMo-format file. Each combination is one ``paperclip eval
locomo`` replay of the halves' conversations (recorded questions, the
default), in a child process of its own, its results in
``DIR/<mode>-<clock>-<model>.json``; a combination whose file is there
already is not replayed again unless ``--rerun`` says so (so a stopped run
resumes). ``--lock FILE`` runs each replay under ``flock FILE``, so that a
shared machine runs one heavy job at a time and the others wait between
replays, not for the whole matrix. The table gives, for the fusion retriever
of each combination and half, evidence presence and answer presence over
categories 1–4, evidence presence over the questions of categories 1–4 that
name no calendar day or month (how many, in brackets: under ``--clock
burst`` every session happened today, so a day a question names never came)
and the memory block's tokens per question; no ``--half``:
the whole file as one half.

The replays run the proxy of the checkout this script is in (``python -m
proxy`` from its root, where ``PYTHONPATH`` comes second): to measure another
checkout, run that checkout's copy of this script.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This folder's profile.py would shadow the standard library's, which torch imports.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from proxy.eval import report  # noqa: E402


def halves_of(specs: list[str]) -> dict[str, list[str]]:
    """``NAME=ID,ID`` specs as a half's name -> its conversations."""
    out = {}
    for spec in specs:
        name, _, ids = spec.partition("=")
        if not name or not ids:
            raise SystemExit(f"--half {spec!r}: expected NAME=ID,ID")
        out[name] = [i.strip() for i in ids.split(",") if i.strip()]
    return out


def replay(args: argparse.Namespace, out: Path, mode: str, clock: str, model: str, convs: list[str]) -> None:
    command = [sys.executable, "-m", "proxy", "eval", "locomo", args.path, "--mode", mode, "--clock", clock,
               "--model", model, "--embedder", args.embedder, "--no-progress", "--out", str(out)]
    if convs:
        command += ["--convs", ",".join(convs)]
    print(f"replaying {out.name}", file=sys.stderr, flush=True)
    lock = ["flock", args.lock] if args.lock else []
    subprocess.run([*lock, *command], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def table(files: dict[tuple[str, str, str], Path], halves: dict[str, list[str]]) -> str:
    lines = [
        "| mode | clock | model | half | evidence (cats 1-4) | answers (cats 1-4) | evidence, no date named (n) "
        "| memory tok | questions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (mode, clock, model), path in files.items():
        _, answers = report.read_answers(path)
        groups = halves or {"all": sorted({a.conversation for a in answers})}
        for half, row in report.by_half(answers, groups).items():
            lines.append(
                f"| {mode} | {clock} | {model} | {half} | {row['cats 1-4']:.3f} | {row['answers 1-4']:.3f} "
                f"| {report.cell('', row['cats 1-4, no date named'])} ({undated(row)}) "
                f"| {row['memory tok']:.0f} | {row['questions']} |"
            )
    return "\n".join(lines)


def undated(row: dict[str, int]) -> int:
    """How many of a half's scored questions name no calendar day or month."""
    return row["scored"] - row["date named"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="a LoCoMo-format JSON file")
    parser.add_argument("--dir", required=True, help="where each combination's results go")
    parser.add_argument("--lock", default=None, help="run each replay under flock on this file")
    parser.add_argument("--half", action="append", default=[], metavar="NAME=IDS")
    parser.add_argument("--modes", default="sessions,one-chat")
    parser.add_argument("--clocks", default="dated,burst")
    parser.add_argument("--models", default="rules,observations")
    parser.add_argument("--embedder", default="bundled", help="embedding.model of every replay")
    parser.add_argument("--md", default=None, help="write the table here too")
    parser.add_argument("--rerun", action="store_true", help="replay combinations whose results exist")
    args = parser.parse_args()
    halves = halves_of(args.half)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    convs = sorted({c for ids in halves.values() for c in ids})
    files = {}
    for mode, clock, model in itertools.product(*(v.split(",") for v in (args.modes, args.clocks, args.models))):
        out = folder / f"{mode}-{clock}-{model}.json"
        if args.rerun or not out.exists():
            replay(args, out, mode, clock, model, convs)
        files[(mode, clock, model)] = out
    text = table(files, halves)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
