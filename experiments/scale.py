"""The cost curve: load, build and query time and peak memory from 1,000 to 100,000 records.

Per size, in a process of its own (so peak memory and cold caches are that size's alone):

- `garden generate` writes a story of that size (JSON Lines) and its cases, once; a later
  run reuses them, and the embeddings cached for them;
- the story is loaded twice (first and second read: the second has the OS's file cache);
- each index (bm25, bm25s, tfidf, the phrase index, dense) is built cold, with no save
  read (saving it included), then loaded warm from its save in a fresh cache, as a second
  process would. Dense's cold build at a size is its first-ever encoding, timed once and
  kept beside the story; later runs restore the vectors from the embedding cache;
- every generated case's queries (the case and its controls) run under `default` and bare
  `bm25s`, once untimed (warm: indexes loaded, query embeddings cached), then `--rounds`
  times interleaved, so a slow moment of a shared machine falls on both. Per-stage times
  come from each outcome's own timings (the triage stage includes the query's resolution);
- peak memory is the process's maximum resident set (`ru_maxrss`).

Figures are medians and 95th percentiles (experiments/harness/timing.py); across sizes, the slope of log(time) on
log(records) says how each cost grows (1 is linear).

    .venv/bin/python experiments/scale.py [--sizes 1000,10000,100000] [--rounds 3] [--plot docs/scale.png]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.benchmarks import OUT  # noqa: E402
from experiments.harness.stories import SEED, WORK, case_queries, size_options, story_at  # noqa: E402
from experiments.harness.timing import peak_mb, query_rounds, spread, timed  # noqa: E402

KINDS = ("bm25", "bm25s", "tfidf", "phrase", "dense")
PIPELINES = ("default", "bm25s")
TARGETS = {"default_p50_ms": 50, "default_p95_ms": 150, "lexical_build_s": 30, "saved_load_s": 3,
           "peak_mb": 4096, "steepest_stage_slope": 1.0}


def one_size(size: int, rounds: int, work: Path) -> dict:
    """Every figure of one size; runs in its own process (see main)."""
    root = work / f"r{size}"
    os.environ["GARDEN_HOME"] = str(root / ".garden")
    os.environ["GARDEN_TRACE"] = "0"
    from garden.pipelines.indexes import COUNTS, PROCESS_INDEXES, IndexCache
    from garden.formats.cases import check
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    story_path, cases_dir = story_at(size, work)
    first, story = timed(lambda: load_story(story_path))
    second, _ = timed(lambda: load_story(story_path))
    out: dict = {"records": len(story.records), "bytes": story_path.stat().st_size,
                 "generate_s": json.loads((root / "generated.json").read_text())["seconds"],
                 "load_story_s": {"first": first, "second": second}, "build_s": {}, "load_saved_s": {},
                 "warm": {}}
    marker = root / "dense-first-encoding.json"
    for kind in KINDS:
        def build(cache):
            return cache.phrase_index(story) if kind == "phrase" else cache.retriever(story, kind)
        cold, _ = timed(lambda: build(IndexCache(read_saved=False)))
        key = "phrase" if kind == "phrase" else f"retriever:{kind}"
        before = COUNTS.copy()
        warm, _ = timed(lambda: build(IndexCache()))
        # what the warm pass did: it must have loaded the save the cold pass wrote
        out["warm"][kind] = {"loaded": COUNTS[f"{key}:loaded"] - before[f"{key}:loaded"],
                             "built": COUNTS[f"{key}:built"] - before[f"{key}:built"]}
        out["build_s"][kind], out["load_saved_s"][kind] = cold, warm
        if kind == "dense":
            if not marker.exists():  # this cold build encoded every text: the one-time cost
                marker.write_text(json.dumps({"seconds": cold}))
            out["dense_first_encoding_s"] = json.loads(marker.read_text())["seconds"]
    specs, expects = case_queries(cases_dir, story)
    pipelines = {name: make_pipeline(name) for name in PIPELINES}
    out["cases_passed"] = {}
    for name, pipeline in pipelines.items():  # untimed: indexes from their saves, query embeddings cached
        failed = {case for spec, (case, expect) in zip(specs, expects)
                  if check(expect, pipeline.run(spec).packet, story, spec.include_private)}
        cases = {case for case, _ in expects}
        out["cases_passed"][name] = {"passed": len(cases - failed), "of": len(cases)}
    totals, stages = query_rounds(rounds, specs, pipelines)
    out["queries"] = len(specs)
    out["rounds"] = rounds
    out["query_ms"] = {p: spread(v) for p, v in totals.items()}
    out["stage_ms"] = {p: {s: spread(v) for s, v in by.items()} for p, by in stages.items()}
    out["peak_mb"] = peak_mb()
    PROCESS_INDEXES.clear()
    return out


def slope(sizes: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log10(value) on log10(records): 1 is linear growth."""
    pairs = [(s, v) for s, v in zip(sizes, values) if v and v > 0]
    if len(pairs) < 2:
        return None
    x, y = np.log10([p[0] for p in pairs]), np.log10([p[1] for p in pairs])
    return float(np.polyfit(x, y, 1)[0])


def curves(results: dict[int, dict]) -> dict[str, list[float]]:
    """Every measured cost, one value per size (sizes ascending)."""
    sizes = sorted(results)
    out = {"load story (s)": [results[s]["load_story_s"]["first"] for s in sizes]}
    for kind in KINDS:
        out[f"build {kind} (s)"] = [results[s]["build_s"][kind] for s in sizes]
        out[f"load saved {kind} (s)"] = [results[s]["load_saved_s"][kind] for s in sizes]
    for p in PIPELINES:
        out[f"{p} query p50 (ms)"] = [results[s]["query_ms"][p]["p50"] for s in sizes]
        for stage in results[sizes[-1]]["stage_ms"][p]:
            out[f"{p} stage {stage} p50 (ms)"] = [results[s]["stage_ms"][p].get(stage, {}).get("p50", 0.0)
                                                  for s in sizes]
    out["peak memory (MB)"] = [results[s]["peak_mb"] for s in sizes]
    return out


def summary(results: dict[int, dict]) -> dict:
    sizes = sorted(results)
    table = curves(results)
    big = results[sizes[-1]]
    lexical = max(big["build_s"][k] for k in ("bm25", "bm25s", "tfidf"))
    saved = max(big["load_saved_s"][k] for k in KINDS)
    targets = {
        "default_p50_ms": big["query_ms"]["default"]["p50"], "default_p95_ms": big["query_ms"]["default"]["p95"],
        "lexical_build_s": lexical, "saved_load_s": saved, "peak_mb": big["peak_mb"]}
    slopes = {name: slope(sizes, values) for name, values in table.items()}
    stage_slopes = {n: v for n, v in slopes.items() if " stage " in n and v is not None}
    if stage_slopes:  # a query stage whose time grows faster than the store is the one to fix
        steepest = max(stage_slopes, key=stage_slopes.get)
        targets["steepest_stage_slope"] = stage_slopes[steepest]
    return {"sizes": sizes, "seed": SEED, "results": {str(s): results[s] for s in sizes},
            "slopes": slopes, "steepest_stage": steepest if stage_slopes else None,
            "at_largest": {k: {"value": v, "target": TARGETS[k], "met": v <= TARGETS[k]} for k, v in targets.items()}}


def plot(results: dict[int, dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    table = curves(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.2))
    for name in ("load story (s)", "build bm25s (s)", "build bm25 (s)", "build tfidf (s)", "build phrase (s)",
                 "load saved bm25s (s)", "load saved phrase (s)"):
        left.loglog(sizes, table[name], marker="o", label=name)
    left.set(xlabel="records", ylabel="seconds", title="load and build")
    for name in ("default query p50 (ms)", "bm25s query p50 (ms)"):
        right.loglog(sizes, table[name], marker="o", linewidth=2.5, label=name)
    stages = sorted((n for n in table if n.startswith("default stage")), key=lambda n: -table[n][-1])[:5]
    for name in stages:
        right.loglog(sizes, table[name], marker=".", linestyle="--", label=name.replace("default stage ", "stage "))
    right.set(xlabel="records", ylabel="milliseconds", title="warm query latency (p50)")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run(sizes: list[int], rounds: int = 3, work: Path = WORK) -> dict:
    """Each size in a fresh process; the summary of all of them."""
    results = {}
    for size in sizes:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", str(size),
                               "--rounds", str(rounds), "--work", str(work)],
                              capture_output=True, text=True, cwd=PROJECT)
        if done.returncode != 0:
            raise RuntimeError(f"size {size} failed:\n{done.stderr[-3000:]}")
        results[size] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary(results)


def show(report: dict) -> None:
    sizes = report["sizes"]
    rows = [("records", *(f"{s:,}" for s in sizes), "slope")]
    results = {int(k): v for k, v in report["results"].items()}
    for name, values in curves(results).items():
        s = report["slopes"].get(name)
        rows.append((name, *(f"{v:.3g}" for v in values), f"{s:.2f}" if s is not None else "-"))
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(r[0].ljust(width), *(c.rjust(9) for c in r[1:]))
    for size in sizes:
        passed = report["results"][str(size)]["cases_passed"]
        print(f"{size:,} records, generated cases passed (query and controls):",
              ", ".join(f"{p} {v['passed']}/{v['of']}" for p, v in passed.items()))
    for k, v in report["at_largest"].items():
        what = f" ({report['steepest_stage']})" if k == "steepest_stage_slope" else ""
        print(f"{k}: {v['value']:.3g}{what} (target {v['target']}) {'met' if v['met'] else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_options(ap, "1000,10000,100000", WORK, OUT / "scale.json", "show (and plot) a saved run's figures instead")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--plot", default=str(OUT / "scale.png"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, in this process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_size(args.one, args.rounds, Path(args.work))))
        return 0
    if args.again:
        saved = json.loads(Path(args.again).read_text())
        report = summary({int(k): v for k, v in saved["results"].items()})
        report.update({"run": saved["run"]} if "run" in saved else {})
    else:
        report = run([int(s) for s in args.sizes.split(",")], args.rounds, Path(args.work))
    write_json(args.json, report, indent=1)
    plot({int(k): v for k, v in report["results"].items()}, Path(args.plot))
    show(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
