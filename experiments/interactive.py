"""How long the interactive commands take on the shipped stories, warm, beside `garden query`.

Each command is what a person types and waits for, run as a whole process on a scratch
copy of the project (the shipped stories and cases), the user's embedding cache and the
scratch garden home warm (one untimed run of each first). The commands are interleaved
round by round, so a slow moment of a shared machine falls on all of them, and each is
reported as its median wall time and as a ratio to `garden query`'s median in the same run:

- query: `garden query aurora-ridge "Who sleeps in the afternoon?"` (the reference), and
  the same command with a question never asked before (its vector is encoded: the model
  is loaded, which a question asked before does not need);
- contrast: `garden contrast` (every shipped case under each bare retriever and default);
- capture: `garden capture TRACE --query 1` of a judged miss, into a fresh folder;
- judge start: `garden judge TRACE --source query` until its first question is asked
  (the answers run out at once);
- backup: `garden backup --out FILE` (the durable part, and every case's verdict under default);
- compare: `garden compare TRACE --pipelines bm25s,default` on a small trace (one `garden run`
  of the shipped cases and two free queries, about 80 distinct questions).

    .venv/bin/python experiments/interactive.py [--rounds 5] [--json]

The aim is two seconds warm for each; the figures say how far each is from it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.results import stamped  # noqa: E402
from experiments.harness.timing import timed  # noqa: E402

GARDEN = Path(sys.executable).with_name("garden")
BATTERY = "How do we keep spare batteries warm?"
SLEEP = "Who sleeps in the afternoon?"
NEW = "What did Jonas say about the stove?"
AIM_S = 2.0


def scratch() -> Path:
    """A copy of the shipped stories and cases with its own garden home, a trace of one run
    of the cases and two free queries, and the free queries judged."""
    root = Path(tempfile.mkdtemp(prefix="garden-interactive-"))
    for name in ("fixtures", "regression", "challenge"):
        shutil.copytree(PROJECT / name, root / name)
    garden(root, "run")
    for query in (BATTERY, SLEEP):
        garden(root, "query", "aurora-ridge", query)
    answers = root / "answers.txt"
    answers.write_text("a\nn\nn\nn\nnote.battery=l\na\nl\nn\n\n", encoding="utf-8")
    garden(root, "judge", ".garden/traces", "--source", "query", "--pipelines", "default,bm25s",
           "--answers", str(answers))
    (root / "empty.txt").write_text("", encoding="utf-8")
    return root


def garden(root: Path, *args: str, check: bool = True) -> float:
    """Seconds one `garden` process takes, start to exit."""
    env = {**os.environ, "GARDEN_HOME": str(root / ".garden"), "HF_HUB_OFFLINE": "1"}
    env.pop("COLUMNS", None)
    elapsed, done = timed(lambda: subprocess.run([str(GARDEN), *args], cwd=root, env=env, capture_output=True,
                                                 text=True))
    if check and done.returncode != 0:
        raise SystemExit(f"garden {' '.join(args)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return elapsed


def commands(root: Path, n: int) -> dict[str, list[str]]:
    """The commands of round `n` (what they write is named by the round, so none refuses)."""
    return {
        "query": ["query", "aurora-ridge", SLEEP],
        # a question never asked before: its vector is encoded, so the model is loaded
        "query, new text": ["query", "aurora-ridge", f"{NEW} ({os.getpid()}-{n}-{time.time_ns()})"],
        "contrast": ["contrast"],
        "capture": ["capture", ".garden/traces", "--query", BATTERY, "--judgments", "judgments/traces.qrels",
                    "--name", f"battery-{n}", "--out", f"captured-{n}"],
        "judge start": ["judge", ".garden/traces", "--source", "query", "--judgments", f"judgments/fresh-{n}.qrels",
                        "--answers", "empty.txt"],
        "backup": ["backup", "--out", str(root / f"backup-{n}.tar.gz")],
        "compare": ["compare", ".garden/traces", "--pipelines", "bm25s,default"],
    }


def measure(rounds: int) -> dict:
    root = scratch()
    try:
        for name, args in commands(root, 0).items():   # warm: indexes saved, models exported, caches filled
            garden(root, *args)
        times: dict[str, list[float]] = {}
        for n in range(1, rounds + 1):
            for name, args in commands(root, n).items():
                times.setdefault(name, []).append(garden(root, *args))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    query = statistics.median(times["query"])
    return {name: {"median_s": round(statistics.median(t), 3), "min_s": round(min(t), 3),
                   "max_s": round(max(t), 3), "ratio_to_query": round(statistics.median(t) / query, 2),
                   "within_aim": statistics.median(t) <= AIM_S}
            for name, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    figures = measure(args.rounds)
    if args.json:
        print(json.dumps(stamped({"rounds": args.rounds, "aim_s": AIM_S, "commands": figures}), indent=2))
        return 0
    print(f"warm, {args.rounds} rounds, medians (min-max); aim {AIM_S:g} s")
    for name, f in figures.items():
        print(f"{name:12} {f['median_s']:6.2f} s ({f['min_s']:.2f}-{f['max_s']:.2f})  "
              f"{f['ratio_to_query']:5.2f} x query  {'within' if f['within_aim'] else 'over'} the aim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
