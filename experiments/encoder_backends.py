"""The `dense` backends side by side, in one run: speed, and the figures each gives.

1. Texts a second, the model loaded, nothing cached, on three kinds of text: short
   conversational turns (LoCoMo turns), long passages (Vaswani abstracts) and LongMemEval's
   turns (its development sample's distinct turns, a user's and an assistant's), `--texts` of
   each. Each row is one way of encoding, all in this process, interleaved round by round so a
   slow moment of a shared machine falls on all of them; the median over `--rounds` rounds and
   each row's ratio to torch (sentence-transformers, batch 64). Beside the backends as they
   ship, each choice they make is undone in a row of its own: batches in arrival order (not
   sorted by token length), one thread (not every core), threads that spin while waiting.
2. Figures: `dense:backend=B` on Vaswani (AP, nDCG@10 over its 93 queries, the collection's
   own relevance judgments) and on the LoCoMo conversations (turn-level nDCG@10 and
   Success@5, judged on the benchmark's annotated evidence turns), and each figure's
   difference from torch's. The first run encodes both corpora once per backend into the
   user's embedding cache (minutes); later runs read them back.

The default backend is the fastest one whose four figures all stay within 0.005 of torch's
(`--tolerance`); the script says which that is.

    .venv/bin/python experiments/encoder_backends.py [--texts 600] [--rounds 3] [--speed-only] [--json]
        [--vaswani DIR] [--locomo PATH] [--longmemeval FILE]

Vaswani: ../shared/data/vaswani. LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0; read from
../shared/data/locomo. LongMemEval: Wu et al., ICLR 2025 (MIT); its development sample read
from ../shared/data/longmemeval (experiments/harness/benchmarks.py's defaults).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments, text_samples  # noqa: E402
from experiments.harness.timing import interleaved, timed  # noqa: E402
from garden.evaluation.compare import compare_collection  # noqa: E402
from garden.evaluation.locomo import compare_locomo  # noqa: E402
from garden.retrievers.dense import BACKENDS, OnnxEncoder, load_encoder, model_dir, session_threads  # noqa: E402

TOLERANCE = 0.005
BATCH = 64
BENCHMARKS = ("vaswani", "locomo", "longmemeval")


def arrival_batches(lengths: list[int]) -> list[list[int]]:
    """Batches of 64 in the order the texts came: each padded to its longest."""
    return [list(range(start, min(start + BATCH, len(lengths)))) for start in range(0, len(lengths), BATCH)]


def ways() -> dict[str, object]:
    """Each way of encoding, by name: a callable from texts to vectors."""
    path = model_dir()
    torch = load_encoder("torch", path)
    out = {"torch": lambda texts: torch.encode(texts, BATCH)}
    for backend in BACKENDS[1:]:
        shipped = load_encoder(backend, path)
        out[backend] = lambda texts, e=shipped: e.encode(texts, BATCH)
    int8 = load_encoder("onnx-int8", path)
    out["onnx-int8, arrival order"] = lambda texts: int8.encode_batches(texts, arrival_batches)
    single = OnnxEncoder("onnx-int8", path, threads=1)
    out["onnx-int8, 1 thread"] = lambda texts: single.encode(texts, BATCH)
    spinning = OnnxEncoder("onnx-int8", path, spinning=True)
    out["onnx-int8, spinning"] = lambda texts: spinning.encode(texts, BATCH)
    return out


def speeds(texts: dict[str, list[str]], rounds: int) -> dict[str, dict[str, float]]:
    encoders = ways()
    for encode in encoders.values():  # first calls pay one-off costs (allocation, kernels)
        encode(texts["LoCoMo turns"][:16])

    def rate(way: str, kind: str) -> float:
        seconds, _ = timed(lambda: encoders[way](texts[kind]))
        return len(texts[kind]) / seconds
    seen = interleaved(rounds, texts, list(encoders), lambda way, kind: (kind, rate(way, kind)))
    return {w: {kind: statistics.median(r for k, r in got if k == kind) for kind in texts} for w, got in seen.items()}


def figures(vaswani_path: str, locomo_path: str) -> dict[str, dict[str, float]]:
    names = [f"dense:backend={b}" for b in BACKENDS]
    vaswani = compare_collection(vaswani_path, names, measures=("AP", "nDCG@10")).evaluation.aggregates
    locomo = compare_locomo(locomo_path, names, packets=False).turn.evaluation.aggregates
    out = {}
    for backend, name in zip(BACKENDS, names):
        out[backend] = {"Vaswani AP": vaswani[name]["AP"], "Vaswani nDCG@10": vaswani[name]["nDCG@10"],
                        "LoCoMo nDCG@10": locomo[name]["nDCG@10"], "LoCoMo Success@5": locomo[name]["Success@5"]}
    return out


def measure(count: int, rounds: int, tolerance: float, with_figures: bool, paths: dict[str, str]) -> dict:
    speed = speeds(text_samples(count, paths["locomo"], paths["vaswani"], paths["longmemeval"]), rounds)
    rows = {way: {"texts_per_s": s, "speedup": {k: s[k] / speed["torch"][k] for k in s}} for way, s in speed.items()}
    result = {"texts": count, "rounds": rounds, "batch_size": BATCH, "threads": session_threads(),
              "cores": os.cpu_count(), "load_average": os.getloadavg(), "ways": rows}
    if with_figures:
        figs = figures(paths["vaswani"], paths["locomo"])
        for backend in BACKENDS:
            drift = {k: figs[backend][k] - figs["torch"][k] for k in figs["torch"]}
            rows[backend].update(figures=figs[backend], difference_from_torch=drift,
                                 within_tolerance=all(abs(d) <= tolerance for d in drift.values()))
        eligible = [b for b in BACKENDS if rows[b]["within_tolerance"]]
        result["choice"] = max(eligible, key=lambda b: min(rows[b]["speedup"].values()))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--speed-only", action="store_true", help="texts a second only, no figures")
    ap.add_argument("--json", action="store_true")
    args = arguments(ap, BENCHMARKS, argv, out=False)
    result = measure(args.texts, args.rounds, args.tolerance, not args.speed_only,
                     {b: getattr(args, b) for b in BENCHMARKS})
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.texts} texts of each kind, median of {args.rounds} rounds, batch {BATCH}, "
          f"{result['threads']} threads, load average {result['load_average'][0]:.1f} on {result['cores']} cores")
    kinds = list(next(iter(result["ways"].values()))["texts_per_s"])
    print(f"{'texts/s (x torch)':26}" + "".join(f"{k:>22}" for k in kinds))
    for way, row in result["ways"].items():
        print(f"{way:26}" + "".join(f"{row['texts_per_s'][k]:>14.1f} ({row['speedup'][k]:4.2f})" for k in kinds))
    if "choice" in result:
        print(f"{'figures (- torch)':26}" + "".join(f"{k:>22}" for k in result["ways"]["torch"]["figures"]))
        for backend in BACKENDS:
            row = result["ways"][backend]
            print(f"{backend:26}" + "".join(f"{v:>13.4f} ({row['difference_from_torch'][k]:+.4f})"
                                            for k, v in row["figures"].items()))
        print(f"fastest backend within {args.tolerance} of torch on every figure: {result['choice']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
