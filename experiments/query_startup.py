"""What one `garden query` costs as a whole process, caches warm, and where the time goes.

Two measurements, in one run, so a slow moment of a shared machine falls on both:

1. Whole process: `garden query STORY TEXT --pipeline P` for `default` and for a bare
   `bm25`, interleaved, `--runs` times each after one untimed warm-up of each (saved
   indexes, embedding cache, exported model all filled). Median and spread per pipeline,
   and the ratio of the medians.
2. Breakdown: a fresh process per run walks the same query step by step and times each:
   interpreter (process wall time less what the script measured inside it), start-up
   (importing the command line), story (the file hashed and its saved story read, as
   `garden query` reads it: garden/store/stored.py), model (loading
   the query encoder; none for bm25), indexes (reading the saved indexes), query (the
   pipeline's run: triage to packet). Medians over the runs.

    .venv/bin/python experiments/query_startup.py [--story aurora-ridge] [--runs 7]

Run from the project's root (the story is read from fixtures/).
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

from experiments.harness.results import stamped  # noqa: E402
from experiments.harness.timing import STEP_TIMER, interleaved, timed  # noqa: E402

GARDEN = Path(sys.executable).with_name("garden")
QUESTION = "Why have I not felt like gaming recently?"
PIPELINES = ("bm25", "default")

# Runs in a fresh interpreter: each step is timed as a real query meets it, nothing warm in memory.
STEPS = STEP_TIMER + r"""
import garden.cli                                  # what the command imports before it parses
from pathlib import Path
from garden.formats.stories import resolve_story_path
mark("start-up")
from garden.store.stored import open_story       # what `garden query` reads: the story's save
from garden.formats.stories import latest_date
story = open_story(resolve_story_path(sys.argv[1], Path.cwd()))
mark("story")
from garden.pipelines import make_pipeline
from garden.rerank.query import QuerySpec
pipeline = make_pipeline(sys.argv[3])
from garden.retrievers.dense import DEFAULT_BACKEND, model_dir
if sys.argv[3] != "bm25":
    from garden.retrievers.dense import load_encoder
    load_encoder(DEFAULT_BACKEND, model_dir())
mark("model")
from garden.pipelines.indexes import PROCESS_INDEXES
PROCESS_INDEXES.retriever(story, sys.argv[4])
if sys.argv[3] != "bm25":
    PROCESS_INDEXES.phrase_index(story)
mark("indexes")
pipeline.run(QuerySpec(story, sys.argv[2], latest_date(story)))
mark("query")
print(json.dumps(marks))
"""


def whole_process(pipeline: str, story: str) -> float:
    return timed(lambda: subprocess.run([str(GARDEN), "query", story, QUESTION, "--pipeline", pipeline], cwd=PROJECT,
                                        check=True, stdout=subprocess.DEVNULL,
                                        env={**os.environ, "GARDEN_TRACE": "0"}))[0]


def stepped(pipeline: str, story: str) -> dict[str, float]:
    base = "hybrid" if pipeline == "default" else pipeline
    wall, done = timed(lambda: subprocess.run([sys.executable, "-c", STEPS, story, QUESTION, pipeline, base],
                                              cwd=PROJECT, check=True, capture_output=True, text=True,
                                              env={**os.environ, "GARDEN_TRACE": "0"}))
    marks = json.loads(done.stdout.strip().splitlines()[-1])
    return {"interpreter": wall - sum(marks.values()), **marks, "total": wall}


def measure(story: str, runs: int) -> dict:
    for pipeline in PIPELINES:  # warm every cache the query reads; untimed
        whole_process(pipeline, story)
    got = interleaved(runs, [story], PIPELINES, lambda pipeline, s: (whole_process(pipeline, s), stepped(pipeline, s)))
    walls = {p: [wall for wall, _ in got[p]] for p in PIPELINES}
    steps = {p: [step for _, step in got[p]] for p in PIPELINES}
    out: dict = {"story": story, "runs": runs, "cpus": os.cpu_count(), "pipelines": {}}
    for pipeline in PIPELINES:
        names = steps[pipeline][0].keys()
        out["pipelines"][pipeline] = {
            "wall_s": {"min": min(walls[pipeline]), "median": statistics.median(walls[pipeline]),
                       "max": max(walls[pipeline])},
            "breakdown_s": {n: statistics.median(s[n] for s in steps[pipeline]) for n in names}}
    medians = {p: out["pipelines"][p]["wall_s"]["median"] for p in PIPELINES}
    out["median_ratio_default_over_bm25"] = medians["default"] / medians["bm25"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--story", default="aurora-ridge")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = measure(args.story, args.runs)
    if args.json:
        print(json.dumps(stamped(result), indent=2))
        return 0
    print(f"`garden query {args.story} ...`, caches warm, {args.runs} runs each, {result['cpus']} CPUs")
    print(f"{'pipeline':10} {'median':>8} {'min':>7} {'max':>7}   breakdown (medians, s)")
    for pipeline, fig in result["pipelines"].items():
        wall = fig["wall_s"]
        parts = "  ".join(f"{n} {v:.2f}" for n, v in fig["breakdown_s"].items())
        print(f"{pipeline:10} {wall['median']:8.2f} {wall['min']:7.2f} {wall['max']:7.2f}   {parts}")
    print(f"median ratio default / bm25: {result['median_ratio_default_over_bm25']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
