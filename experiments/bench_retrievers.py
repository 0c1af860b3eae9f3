"""Queries per second on Vaswani: each garden pipeline beside the raw libraries.

Every figure is a whole 93-query run, tokenization and top-1000 ranking included, in one
process, the median of several repetitions after one warm-up. The garden pipelines are
timed through `garden.evaluation.compare.rankings`, the path `garden compare` takes; raw bm25s is
`bm25s.tokenize` + `BM25.retrieve(k=1000)`, raw rank-bm25 is the same tokens +
`BM25Okapi.get_scores` + a top-1000 sort. The ratio garden-bm25s / raw-bm25s says what the
garden's wrapper costs over the library it wraps.

    .venv/bin/python experiments/bench_retrievers.py [--vaswani DIR] [--repeat 5] [--json FILE]

The first run embeds the corpus for `dense` and `hybrid` (about 100 s on two cores) into
the embedding cache; later runs read it back.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from rank_bm25 import BM25Okapi

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.timing import timed  # noqa: E402
from garden.evaluation.compare import rankings  # noqa: E402
from garden.formats.corpora import load_collection  # noqa: E402
from garden.retrievers import make_retriever  # noqa: E402

PIPELINES = ("bm25", "bm25s", "tfidf", "dense", "hybrid")
DEPTH = 1000


def median_rate(run, n_queries: int, repeat: int) -> float:
    """Queries per second of the median repetition, after one untimed warm-up run."""
    run()
    return n_queries / statistics.median(timed(run)[0] for _ in range(repeat))


def raw_bm25s(texts: list[str], queries: list[str]):
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def run():
        tokens = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
        return model.retrieve(tokens, k=DEPTH, show_progress=False)

    return run


def raw_rank_bm25(texts: list[str], queries: list[str]):
    stemmer = Stemmer.Stemmer("english")

    def tokenize(batch):
        return bm25s.tokenize(batch, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)

    model = BM25Okapi(tokenize(texts), k1=1.5, b=0.75)

    def run():
        out = []
        for tokens in tokenize(queries):
            scores = model.get_scores(tokens)
            top = np.argpartition(-scores, DEPTH)[:DEPTH]
            out.append(top[np.argsort(-scores[top], kind="stable")])
        return out

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pipelines", default=",".join(PIPELINES))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = arguments(parser, ("vaswani",), argv, out=False)

    collection = load_collection(args.vaswani)
    queries = list(collection.queries.values())
    texts = [d.text for d in collection.docs]
    n = len(queries)
    rates: dict[str, float] = {}
    index_s: dict[str, float] = {}

    for name in args.pipelines.split(","):
        retriever = make_retriever(name)
        index_s[name], _ = timed(lambda: retriever.index(collection.docs))
        rates[name] = median_rate(lambda: rankings(retriever, queries, DEPTH), n, args.repeat)
        print(f"garden {name:8s} {rates[name]:9.1f} queries/s   (index {index_s[name]:.1f} s)", flush=True)

    rates["raw-bm25s"] = median_rate(raw_bm25s(texts, queries), n, args.repeat)
    print(f"raw    bm25s    {rates['raw-bm25s']:9.1f} queries/s", flush=True)
    rates["raw-rank-bm25"] = median_rate(raw_rank_bm25(texts, queries), n, args.repeat)
    print(f"raw    rank-bm25 {rates['raw-rank-bm25']:8.1f} queries/s", flush=True)

    if "bm25s" in rates:
        ratio = rates["bm25s"] / rates["raw-bm25s"]
        print(f"garden-bm25s / raw-bm25s = {ratio:.2f}  (target >= 0.5)")
        rates["ratio_garden_bm25s_to_raw"] = ratio
    if args.json:
        write_json(args.json, {"queries": n, "repeat": args.repeat, "queries_per_s": rates, "index_s": index_s})
    return 0


if __name__ == "__main__":
    sys.exit(main())
