"""What one `garden query` process costs as the store grows, stage by stage, beside the
48-record Aurora Ridge in the same run.

Per store (Aurora Ridge, the reference, and generated stories of `--sizes` records, seed 7,
as experiments/scale.py makes them), caches warm (saved story, tables and indexes, the
embedding cache and the exported model all filled by an untimed first query):

1. Whole process: `garden query STORE QUESTION` (`default`, trace off, output to a pipe),
   `--runs` times, the stores interleaved in every round so a slow moment of a shared
   machine falls on all of them. Median per store and its ratio to the reference's.
2. Stage by stage, in a fresh process each round: start-up (the interpreter's start and
   exit and the command's imports), story (`open_story`: the file hashed and its save read; with saves
   off, parsed and validated), vocabulary (the decide stage's), model (the query encoder),
   indexes (the saved `hybrid` retriever and phrase index), query (the pipeline's run,
   the first in the process), print (the packet's tables), and beside them the query's
   in-process time once warm (the median of five more runs in the same process: what
   experiments/scale.py measures). Medians over the rounds.
3. The same steps with every story and table save off (`in_memory`): the story parsed and
   validated and its tables made in the process, as before they were saved.

QUESTION is asked of every store. Generated stores are also asked WIDE, a question about a
topic that one record in twelve carries: its packet's rejected list grows with the store
(1,611 rows at 20,000 records), so its print shows what printing costs per row.

    nice .venv/bin/python experiments/query_cost.py [--sizes 1000,10000,100000] [--runs 5]

Run from the project's root. Stories are generated under experiments/out/query_cost/
(kept: a later run reuses them and their embeddings).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.benchmarks import OUT  # noqa: E402
from experiments.harness.stories import size_options, story_at  # noqa: E402
from experiments.harness.timing import STEP_TIMER, interleaved, timed  # noqa: E402

WORK = PROJECT / "experiments" / "out" / "query_cost"
GARDEN = Path(sys.executable).with_name("garden")
QUESTION = "Why have I not felt like gaming recently?"
WIDE = "What is the state of the sleds?"
REFERENCE = "aurora-ridge"
TARGET_S, TARGET_RATIO = 1.5, 1.3

# Runs in a fresh interpreter: each step timed as a query meets it, nothing warm in memory.
STEPS = STEP_TIMER + r"""
import os, statistics
import garden.cli                                  # what the command imports before it parses
mark("start-up")
from contextlib import nullcontext
from garden.derived.tables import in_memory
with (in_memory() if sys.argv[3] == "off" else nullcontext()):
    from garden.store.stored import open_story
    story = open_story(sys.argv[1])
    mark("story")
    from garden.rerank.decide import vocabulary
    vocabulary(story)
    mark("vocabulary")
    from garden.retrievers.dense import DEFAULT_BACKEND, load_encoder, model_dir
    load_encoder(DEFAULT_BACKEND, model_dir())
    mark("model")
    from garden.pipelines.indexes import PROCESS_INDEXES
    PROCESS_INDEXES.retriever(story, "hybrid")
    PROCESS_INDEXES.phrase_index(story)
    mark("indexes")
    from garden.formats.stories import latest_date
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec
    spec = QuerySpec(story, sys.argv[2], latest_date(story))
    pipeline = make_pipeline("default")
    outcome = pipeline.run(spec)
    mark("query")
    from garden import report
    from rich.console import Console
    report.console = Console(soft_wrap=False, width=160, file=open(os.devnull, "w"))
    report.show_packet(outcome.packet, "default")
    mark("print")
    warm = []
    for _ in range(5):
        start = time.perf_counter(); pipeline.run(spec); warm.append(time.perf_counter() - start)
print(json.dumps({"marks": marks, "warm_query": statistics.median(warm), "warm_total": sum(warm),
                  "items": len(outcome.packet.items), "rejected": len(outcome.packet.rejected)}))
"""
STAGES = ("start-up", "story", "vocabulary", "model", "indexes", "query", "print")


def stores(sizes: list[int], work: Path) -> dict[str, Path]:
    """The reference and a generated story per size (made once per work folder)."""
    out = {REFERENCE: PROJECT / "fixtures" / f"{REFERENCE}.yaml"}
    for size in sizes:
        out[f"{size:,}"] = story_at(size, work)[0]
    return out


def _env(work: Path) -> dict:
    return {**os.environ, "GARDEN_HOME": str(work / ".garden"), "GARDEN_TRACE": "0"}


def whole_process(story: Path, question: str, work: Path) -> float:
    return timed(lambda: subprocess.run([str(GARDEN), "query", str(story), question], cwd=PROJECT, check=True,
                                        stdout=subprocess.DEVNULL, env=_env(work)))[0]


def stepped(story: Path, question: str, saves: str, work: Path) -> dict:
    wall, done = timed(lambda: subprocess.run([sys.executable, "-c", STEPS, str(story), question, saves], cwd=PROJECT,
                                              check=True, capture_output=True, text=True, env=_env(work)))
    found = json.loads(done.stdout.strip().splitlines()[-1])
    wall -= found["warm_total"]   # the five warm runs are the in-process figure, not the process's
    found["marks"]["start-up"] += wall - sum(found["marks"].values())   # the interpreter's own start and exit
    found["wall"] = wall
    return found


def measure(sizes: list[int], runs: int, work: Path) -> dict:
    found = stores(sizes, work)
    asks = [(name, QUESTION) for name in found] + [(name, WIDE) for name in found if name != REFERENCE]
    for name, question in asks:           # untimed: every save and cache filled
        whole_process(found[name], question, work)

    def one(ask: tuple[str, str], _) -> tuple[float, dict]:
        return (whole_process(found[ask[0]], ask[1], work),
                {saves: stepped(found[ask[0]], ask[1], saves, work) for saves in ("on", "off")})
    got = interleaved(runs, [None], asks, one)
    walls = {a: [wall for wall, _ in got[a]] for a in asks}
    steps = {(a, saves): [step[saves] for _, step in got[a]] for a in asks for saves in ("on", "off")}
    out: dict = {"runs": runs, "cpus": os.cpu_count(), "asks": []}
    reference = statistics.median(walls[(REFERENCE, QUESTION)])
    for ask in asks:
        row = {"store": ask[0], "question": ask[1], "wall_s": statistics.median(walls[ask]),
               "wall_min_s": min(walls[ask]), "wall_max_s": max(walls[ask])}
        row["ratio"] = row["wall_s"] / reference
        for saves in ("on", "off"):
            got = steps[(ask, saves)]
            row[f"stages_{saves}"] = {s: statistics.median(g["marks"][s] for g in got) for s in STAGES}
            row[f"warm_query_{saves}"] = statistics.median(g["warm_query"] for g in got)
            row[f"stepped_total_{saves}"] = statistics.median(g["wall"] for g in got)
        row["items"], row["rejected"] = got[0]["items"], got[0]["rejected"]
        out["asks"].append(row)
    big = [r for r in out["asks"] if r["question"] == QUESTION and r["store"] != REFERENCE]
    if big:
        last = big[-1]
        out["target"] = {"store": last["store"], "wall_s": last["wall_s"], "ratio": last["ratio"],
                         "met": last["wall_s"] <= TARGET_S and last["ratio"] <= TARGET_RATIO}
    return out


def show(result: dict) -> None:
    print(f"`garden query`, one process per question, caches warm; medians of {result['runs']} rounds, "
          f"stores interleaved; {result['cpus']} CPUs")
    for question in (QUESTION, WIDE):
        rows = [r for r in result["asks"] if r["question"] == question]
        if not rows:
            continue
        print(f"\n{question!r}")
        names = [r["store"] for r in rows]
        width = 34
        print("".ljust(width) + "".join(n.rjust(13) for n in names))
        print("whole process (s)".ljust(width) + "".join(f"{r['wall_s']:13.3f}" for r in rows))
        print("  ratio to the reference".ljust(width) + "".join(f"{r['ratio']:13.2f}" for r in rows))
        for saves, title in (("on", "stages, saves read (s)"), ("off", "stages, saves off (s)")):
            print(title)
            for stage in STAGES:
                print(f"  {stage}".ljust(width) + "".join(f"{r[f'stages_{saves}'][stage]:13.3f}" for r in rows))
            print("  total, stepped process (s)".ljust(width)
                  + "".join(f"{r[f'stepped_total_{saves}']:13.3f}" for r in rows))
            print("  query in process, warm (ms)".ljust(width)
                  + "".join(f"{r[f'warm_query_{saves}'] * 1e3:13.1f}" for r in rows))
        print("packet: items / rejected".ljust(width) + "".join(f"{r['items']:>7} / {r['rejected']:<4}" for r in rows))
    if "target" in result:
        t = result["target"]
        print(f"\ntarget at {t['store']} records: whole process {t['wall_s']:.2f} s (at most {TARGET_S}), "
              f"{t['ratio']:.2f} times the reference's (at most {TARGET_RATIO}): {'met' if t['met'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_options(ap, "1000,10000,100000", WORK, OUT / "query_cost.json", "show a saved run's figures instead")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    if args.again:
        result = json.loads(Path(args.again).read_text())
    else:
        result = measure([int(s) for s in args.sizes.split(",") if s], args.runs, Path(args.work))
        write_json(args.json, result, indent=1)
    show(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
