"""Vaswani on Milvus: `bm25`, `milvus-bm25`, `dense`, `milvus-dense` side by side.

1. Ingest: each Milvus member indexes the collection into an empty Milvus Lite store
   (`--uri` for a server instead), timed; then a second retriever indexes the same
   documents, which finds the collection and inserts nothing, timed, in this process and
   in a new one (which loads the collection, and for `milvus-dense` the encoder).
2. Latency: each query of the collection alone, `top(query, 1000)` (one search round trip
   for a Milvus member; the query's encoding included for the dense pair), after
   `--warm-up` untimed queries: p50 and p95 in milliseconds (experiments/harness/timing.py's
   percentile), in-process members beside the Milvus ones.
3. Figures: AP and nDCG@10 over the collection's 93 queries and its relevance judgments,
   through `garden.evaluation.compare.compare_collection`, as `garden compare` computes them.
   `milvus-bm25` indexes the garden's own terms, so it is held to `bm25`.

    .venv/bin/python experiments/milvus_figures.py [--docs N] [--uri http://127.0.0.1:19530] [--json] [--vaswani DIR]
    .venv/bin/python experiments/milvus_figures.py --standalone [URI] [--json] [--vaswani DIR]

`--standalone` measures a Milvus standalone instead (the one URI names, else one started
here and stopped at the end): `milvus-dense` with its HNSW index at the default parameters
against `dense` (exact): the share of `dense`'s top 100 it finds (recall@100), AP and
nDCG@10; and `default@milvus-hybrid` (its lexical member `bm25` in the garden's process:
Milvus 2.3 has no BM25 function) against `default`; with the build's phases and each
query's `top(query, 1000)` time.

`--docs N` keeps the first N documents (and the judgments of those): a subset for a quick
look. The garden home is a fresh temporary folder, removed at the end (`--home` to choose
one, which is kept), so the local store starts empty; the embedding cache is the user's, so the dense vectors of Vaswani
are read from it if an earlier run encoded them.

Vaswani: ../shared/data/vaswani unless `--vaswani` says where.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments  # noqa: E402
from experiments.harness.results import stamped  # noqa: E402
from experiments.harness.timing import spread, timed  # noqa: E402

PIPELINES = ("bm25", "milvus-bm25", "dense", "milvus-dense")
MILVUS = ("milvus-bm25", "milvus-dense")
MEASURES = ("AP", "nDCG@10")
DEPTH = 1000


def subset(source: Path, docs: int | None, folder: Path) -> Path:
    """`source` itself, or a copy in `folder` holding its first `docs` documents."""
    if docs is None:
        return source
    from garden.formats.corpora import load_collection

    collection = load_collection(source)
    kept = collection.docs[:docs]
    ids = {d.id for d in kept}
    root = folder / f"vaswani-{docs}"
    (root / "corpus").mkdir(parents=True, exist_ok=True)
    (root / "corpus" / "doc-text.trec").write_text(
        "".join(f"<DOC>\n<DOCNO>{d.id}</DOCNO>\n{d.text}\n</DOC>\n" for d in kept), encoding="utf-8")
    (root / "query-text.trec").write_text(
        "".join(f"<top>\n<num>{qid}</num>\n<title>{text}</title>\n</top>\n"
                for qid, text in collection.queries.items()), encoding="utf-8")
    (root / "qrels").write_text(
        "".join(f"{qid} 0 {doc} {rel}\n" for qid, rels in collection.qrels.items()
                for doc, rel in rels.items() if doc in ids), encoding="utf-8")
    return root


def ingest(collection, options: dict) -> dict[str, dict]:
    """Each Milvus member built into the store, then found there by a second retriever."""
    from garden.retrievers import make_retriever

    out = {}
    for name in MILVUS:
        first = make_retriever(name, **options)
        built, _ = timed(lambda: first.index(collection.docs))
        second = make_retriever(name, **options)   # made once the first has written the collection
        reused, _ = timed(lambda: second.index(collection.docs))
        out[name] = {"ingest_s": built, "rows": first.inserted, "reuse_s": reused, "reuse_rows": second.inserted,
                     "encoded": getattr(first, "encoded", None), "collection": first.collection}
    return out


ANOTHER_PROCESS = """
import json, sys, time
from garden.formats.corpora import load_collection
from garden.retrievers import make_retriever
collection = load_collection(sys.argv[1])
options = json.loads(sys.argv[2])
out = {}
for name in json.loads(sys.argv[3]):
    retriever = make_retriever(name, **options)
    start = time.perf_counter()
    retriever.index(collection.docs)
    out[name] = {"s": time.perf_counter() - start, "rows": retriever.inserted}
print(json.dumps(out))
"""


def reuse_elsewhere(path: Path, options: dict) -> dict[str, dict]:
    """Each Milvus member's `index` in a new process, which finds the collections this one
    built (the local store handed over first: Milvus Lite serves a store to one process)."""
    if "uri" not in options:
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_all()
    done = subprocess.run([sys.executable, "-c", ANOTHER_PROCESS, str(path), json.dumps(options), json.dumps(MILVUS)],
                          capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.splitlines()[-1])


def latencies(collection, options: dict, warm_up: int) -> dict[str, dict]:
    """Each pipeline's per-query `top(query, DEPTH)` time, p50 and p95 in milliseconds."""
    from garden.retrievers import make_retriever

    out = {}
    for name in PIPELINES:
        retriever = make_retriever(name, **(options if name in MILVUS else {}))
        retriever.index(collection.docs)
        out[name] = timed_tops(retriever, list(collection.queries.values()), warm_up)
    return out


def timed_tops(retriever, queries: list[str], warm_up: int) -> dict[str, float]:
    """`top(query, DEPTH)` of each query alone after `warm_up` untimed ones: p50 and p95, ms."""
    for query in queries[:warm_up]:
        retriever.top(query, DEPTH)
    times = [timed(lambda: retriever.top(query, DEPTH))[0] * 1000 for query in queries]
    return {f"{k}_ms": v for k, v in spread(times).items()}


def figures(path: Path, uri: str | None) -> dict[str, dict[str, float]]:
    from garden.evaluation.compare import compare_collection

    pipelines = [f"{p}:uri={uri}" if uri and p in MILVUS else p for p in PIPELINES]
    report = compare_collection(path, pipelines, measures=MEASURES, depth=DEPTH)
    return {p: dict(report.evaluation.aggregates[spec]) for p, spec in zip(PIPELINES, pipelines)}


RECALL_AT = 100


def recall(exact: dict, approximate: dict, at: int = RECALL_AT) -> float:
    """The share of each query's exact top `at` that the approximate ranking's top `at`
    holds, over every query (recall@at against exact search)."""
    found = sum(len({r for r, _ in exact[q][:at]} & {r for r, _ in approximate.get(q, [])[:at]}) for q in exact)
    return found / max(1, sum(min(at, len(exact[q])) for q in exact))


def on_standalone(uri: str | None, warm_up: int, vaswani: str) -> dict:
    """`dense` and `default` beside `milvus-dense` and `default@milvus-hybrid` on a Milvus
    standalone (`uri`, else one started here): figures, recall@100, build phases, latency."""
    from garden.evaluation.compare import evaluate, run_collection
    from garden.formats.corpora import load_collection
    from garden.retrievers import make_retriever
    from garden.retrievers.milvus import start_standalone, stop_local_server

    scratch = Path(tempfile.mkdtemp(prefix="milvus-standalone-"))
    os.environ["GARDEN_HOME"] = str(scratch / ".garden")
    proc = None
    try:
        if not uri:
            proc, uri = start_standalone(scratch / "standalone", scratch / "standalone.log")
        collection = load_collection(vaswani)
        built = make_retriever(f"milvus-dense:uri={uri}")
        seconds, _ = timed(lambda: built.index(collection.docs))
        ingest = {"s": seconds, "rows": built.inserted, "phases": built.build_s,
                  "index": built.index_type, "engine": built.engine()}
        names = ("dense", f"milvus-dense:uri={uri}", "default", f"default@milvus-hybrid:uri={uri}")
        runs = run_collection(collection, names, depth=DEPTH)
        aggregates = evaluate(collection.qrels, runs.rankings, MEASURES).aggregates
        dense = make_retriever("dense")
        dense.index(collection.docs)
        queries = list(collection.queries.values())
        latency = {name: timed_tops(retriever, queries, warm_up) for name, retriever in (("dense", dense),
                                                                                       ("milvus-dense", built))}
        return {"uri": uri, "ingest": ingest, "latency": latency,
                "figures": {name: dict(aggregates[name]) for name in names},
                f"recall@{RECALL_AT}": recall(runs.rankings["dense"], runs.rankings[names[1]])}
    finally:
        if proc is not None:
            stop_local_server(proc)
        shutil.rmtree(scratch, ignore_errors=True)


def standalone_table(result: dict) -> str:
    rows = ["| pipeline | AP | nDCG@10 |", "|---|---|---|"]
    shown = {name: name.replace(f":uri={result['uri']}", " (standalone)") for name in result["figures"]}
    rows += [f"| {shown[name]} | {fig['AP']:.4f} | {fig['nDCG@10']:.4f} |" for name, fig in result["figures"].items()]
    built = result["ingest"]
    return "\n".join(rows + [
        f"milvus-dense on {built['engine']}: index {built['index']}, recall@{RECALL_AT} against exact "
        f"{result[f'recall@{RECALL_AT}']:.4f}; built in {built['s']:.1f} s ({built['rows']} rows; "
        + ", ".join(f"{k} {v:.1f} s" for k, v in built["phases"].items()) + ")",
        "top(query, 1000), ms p50 / p95: " + "; ".join(f"{k} {v['p50_ms']:.1f} / {v['p95_ms']:.1f}"
                                                      for k, v in result["latency"].items())])


def table(result: dict) -> str:
    rows = ["| pipeline | AP | nDCG@10 | query p50 ms | query p95 ms | ingest s | reuse s, same process "
            "| reuse s, next process |", "|---|---|---|---|---|---|---|---|"]
    for name in PIPELINES:
        fig, lat = result["figures"][name], result["latency"][name]
        built, later = result["ingest"].get(name), result["reuse_elsewhere"].get(name)
        cells = (f"{built['ingest_s']:.1f} ({built['rows']} rows)",
                 f"{built['reuse_s']:.2f} ({built['reuse_rows']} rows)",
                 f"{later['s']:.2f} ({later['rows']} rows)") if built else ("-", "-", "-")
        rows.append(f"| {name} | {fig['AP']:.4f} | {fig['nDCG@10']:.4f} | {lat['p50_ms']:.1f} | "
                    f"{lat['p95_ms']:.1f} | {' | '.join(cells)} |")
    return "\n".join(rows)


def run(docs: int | None, uri: str | None, warm_up: int, home: Path | None, vaswani: str) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="milvus-figures-"))
    os.environ["GARDEN_HOME"] = str(home or scratch / ".garden")
    from garden.formats.corpora import load_collection

    try:
        path = subset(Path(vaswani), docs, scratch)
        collection = load_collection(path)
        options = {"uri": uri} if uri else {}
        result = {"collection": str(vaswani), "documents": len(collection.docs), "queries": len(collection.queries),
                  "store": uri or str(Path(os.environ["GARDEN_HOME"]) / "milvus" / "garden.db")}

        def measure() -> None:
            result["ingest"] = ingest(collection, options)
            result["reuse_elsewhere"] = reuse_elsewhere(path, options)
            result["latency"] = latencies(collection, options, warm_up)
            result["figures"] = figures(path, uri)
        result["wall_s"], _ = timed(measure)
        return result
    finally:
        if not uri:
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_all()
        shutil.rmtree(scratch, ignore_errors=True)  # the temporary home and store (never --home)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=None, help="keep the first N documents (default: all)")
    parser.add_argument("--uri", default=None, help="a Milvus server instead of a fresh local store")
    parser.add_argument("--warm-up", type=int, default=3, help="untimed queries before timing (default 3)")
    parser.add_argument("--home", type=Path, default=None, help="the garden home (default: a fresh temporary one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON as well")
    parser.add_argument("--standalone", nargs="?", const="", default=None, metavar="URI",
                        help="measure a Milvus standalone (this URI, else one started here) instead")
    args = arguments(parser, ("vaswani",), argv, out=False)
    if args.standalone is not None:
        result = on_standalone(args.standalone or None, args.warm_up, args.vaswani)
        print(standalone_table(result))
        if args.json:
            print(json.dumps(stamped(result), indent=2))
        return 0
    result = run(args.docs, args.uri, args.warm_up, args.home, args.vaswani)
    print(f"Vaswani: {result['documents']} documents, {result['queries']} queries; Milvus: {result['store']}")
    print(table(result))
    print(f"wall time {result['wall_s']:.0f} s")
    if args.json:
        print(json.dumps(stamped(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
