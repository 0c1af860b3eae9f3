"""Per-query latency of `default` on one LoCoMo conversation, beside bare bm25s, warm.

One conversation (conv-47 by default: 689 turns, 1,072 records with its observations and
summaries) is loaded once; every judged question is asked once under each pipeline untimed
(indexes built, query embeddings cached: warm), then each question is timed under each
pipeline in turn, interleaved, for several rounds, so a slow moment of a shared machine
falls on both. A query is the whole `run`: triage to packet, as `garden query` runs it.
The figures are the median and 95th percentile over every timed query
(experiments/harness/timing.py), and the ratio of the medians, default over bm25s, which is
what a noisy machine leaves comparable.

    .venv/bin/python experiments/locomo_latency.py [--locomo FILE] [--rounds 3]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0; read from ../shared/data/locomo.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import DEFAULTS, arguments  # noqa: E402
from experiments.harness.results import stamped  # noqa: E402
from experiments.harness.timing import query_rounds, spread  # noqa: E402
from garden.evaluation.locomo import load_conversations  # noqa: E402
from garden.pipelines import make_pipeline  # noqa: E402
from garden.rerank.query import QuerySpec  # noqa: E402

CONVERSATION = DEFAULTS["locomo"] / "conv-47.json"
PIPELINES = ("bm25s", "default")


def measure(file: Path, rounds: int = 3) -> dict:
    conv = load_conversations(file)[0]
    specs = [QuerySpec(conv.story, q.text, q.as_of) for q in conv.questions]
    pipelines = {name: make_pipeline(name) for name in PIPELINES}
    for pipeline in pipelines.values():  # warm: indexes, the model, every query's embedding
        for spec in specs:
            pipeline.run(spec)
    times, _ = query_rounds(rounds, specs, pipelines)
    out = {"conversation": conv.story.story, "records": len(conv.story.records),
           "turns": sum(1 for r in conv.story.records if r.kind == "source"),
           "questions": len(specs), "rounds": rounds, "pipelines": {}}
    for name, values in times.items():
        ms = spread(values)
        out["pipelines"][name] = {"median_ms": ms["p50"], "p95_ms": ms["p95"]}
    medians = {name: out["pipelines"][name]["median_ms"] for name in ("default", "bm25s")}
    out["median_ratio_default_over_bm25s"] = medians["default"] / medians["bm25s"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = arguments(ap, ("locomo",), argv, defaults={"locomo": CONVERSATION}, out=False)
    result = measure(Path(args.locomo), args.rounds)
    print(f"{result['conversation']}: {result['turns']} turns, {result['records']} records, "
          f"{result['questions']} questions x {result['rounds']} rounds, warm")
    for name, v in result["pipelines"].items():
        print(f"  {name:8s} median {v['median_ms']:7.1f} ms   p95 {v['p95_ms']:7.1f} ms")
    print(f"  median ratio default / bm25s: {result['median_ratio_default_over_bm25s']:.1f}")
    print(json.dumps(stamped(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
