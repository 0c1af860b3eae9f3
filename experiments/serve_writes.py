"""What a write costs the next query: a served story written to, then asked, beside a query alone.

A generated story (`garden generate`, as the scale experiments make them) is copied into a
scratch store and served writable by a `Garden` in this process (the server's core, without
HTTP or a second worker): the door's `remember` and `query` are called as `POST /remember`
and `POST /query` call them. Per size, `--rounds` times, interleaved:

- **query alone**: one of the story's generated questions, on the story as it is;
- **write, then query**: one `remember` (answered once on disk), then the same kind of
  question; the query is timed on its own and with the write.

A write changes the story's file, so the next query reads the story again (the shelf sees
the file's size and times change) and every index keyed by the story's content is built
again for it (bm25's, the phrase stage's, the stages' tables): nothing is updated in place.
That is what the ratio measures. The figures are medians and p95s in milliseconds, saved
with the commit and the machine (`experiments/harness/results.py`).

    .venv/bin/python experiments/serve_writes.py                    # 1,000 and 100,000 records, bm25
    .venv/bin/python experiments/serve_writes.py --sizes 1000 --pipeline default
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.stories import WORK, size_options, story_at  # noqa: E402
from experiments.harness.timing import percentile, timed  # noqa: E402

SAVED = PROJECT / "experiments" / "out" / "serve_writes.json"
QUESTIONS = ("What happened with the kiln?", "Who fixed the boiler?", "What changed in the schedule?")


def served(size: int, work: Path, pipeline: str):
    """A Garden serving a fresh copy of the generated story of `size`, writable."""
    from garden.serve import Garden, Shelf, Writing, served_pipelines

    story, _ = story_at(size, work)
    folder = work / f"writes-{size}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "fixtures").mkdir(parents=True)
    shutil.copy(story, folder / "fixtures" / story.name)
    shelf = Shelf.open([story.stem], folder)
    garden = Garden(shelf, pipelines=served_pipelines([pipeline]), deadline=None,
                    writing=Writing.check([story.stem], shelf.paths, clock=lambda: dt.date(2040, 1, 1)))
    return garden, story.stem


def measure(size: int, rounds: int, work: Path, pipeline: str) -> dict:
    from garden.serve import remember

    garden, name = served(size, work, pipeline)
    seconds_first, _ = timed(lambda: garden.query({"story": name, "text": QUESTIONS[0], "pipeline": pipeline}))
    alone, query_after, write_then_query, write = [], [], [], []
    for n in range(rounds):
        question = {"story": name, "text": QUESTIONS[n % len(QUESTIONS)], "pipeline": pipeline}
        seconds, _ = timed(lambda: garden.query(question))
        alone.append(seconds)
        seconds_write, _ = timed(lambda: remember(garden, {"story": name, "text": f"Round {n}: the kiln was "
                                                           "relined and fired again."}))
        seconds_query, packet = timed(lambda: garden.query(question))
        write.append(seconds_write)
        query_after.append(seconds_query)
        write_then_query.append(seconds_write + seconds_query)
    ms = {key: [1000 * s for s in values] for key, values in
          (("query alone", alone), ("write", write), ("query after a write", query_after),
           ("write, then query", write_then_query))}
    row = {"records": size, "pipeline": pipeline, "rounds": rounds, "first query ms": round(1000 * seconds_first, 1),
           "story bytes": os.stat(garden.shelf.paths[name]).st_size}
    for key, values in ms.items():
        row[key] = {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}
    row["ratio of medians"] = round(row["write, then query"]["p50"] / row["query alone"]["p50"], 1)
    return row


def show(rows: list[dict]) -> None:
    print("| records | pipeline | query alone p50 (p95) ms | write p50 ms | query after a write p50 (p95) ms | "
          "write, then query p50 ms | ratio |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['records']:,} | {r['pipeline']} | {r['query alone']['p50']} ({r['query alone']['p95']}) | "
              f"{r['write']['p50']} | {r['query after a write']['p50']} ({r['query after a write']['p95']}) | "
              f"{r['write, then query']['p50']} | {r['ratio of medians']} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size_options(parser, "1000,100000", WORK, SAVED, "show the figures of a saved run")
    parser.add_argument("--rounds", type=int, default=7, help="writes (and queries alone) per size (default 7)")
    parser.add_argument("--pipeline", default="bm25", help="the pipeline served (default bm25: no model to load)")
    args = parser.parse_args(argv)
    if args.again:
        show(json.loads(Path(args.again).read_text())["rows"])
        return 0
    work = Path(args.work)
    os.environ.setdefault("GARDEN_HOME", str(work / ".garden"))
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(size, args.rounds, work, args.pipeline))
        show(rows[-1:])
    write_json(Path(args.json), {"rows": rows})
    show(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
