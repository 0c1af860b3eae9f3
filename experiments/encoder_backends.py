"""The `dense` backends side by side, in one run: speed, and the figures each gives.

For each backend of `garden.retrievers._encoders` (torch, onnx, onnx-int8):

1. Texts a second, the model loaded, nothing cached: short conversational turns (LoCoMo
   turns) and long passages (Vaswani abstracts), `--texts` of each, backends interleaved
   round by round so a slow moment of a shared machine falls on all of them; the median
   over `--rounds` rounds, and each backend's ratio to torch.
2. Figures: `dense:backend=B` on Vaswani (AP, nDCG@10 over its 93 queries, the
   collection's own relevance judgments) and on the LoCoMo conversations (turn-level
   nDCG@10 and Success@5, judged on the benchmark's annotated evidence turns), and each
   figure's difference from torch's. The first run encodes both corpora once per backend
   into the user's embedding cache (minutes); later runs read them back.

The default backend is the fastest one whose four figures all stay within 0.005 of torch's
(`--tolerance`); the script says which that is.

    .venv/bin/python experiments/encoder_backends.py [--texts 600] [--rounds 3] [--json]

Vaswani: ../shared/data/vaswani. LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0; read from
../shared/data/locomo.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from garden.evaluation.compare import compare_collection
from garden.evaluation.locomo import compare_locomo, load_conversations
from garden.formats.corpora import load_collection
from garden.retrievers._encoders import BACKENDS, load_encoder
from garden.retrievers.dense import model_dir

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
VASWANI, LOCOMO = DATA / "vaswani", DATA / "locomo"
TOLERANCE = 0.005
BATCH = 64


def samples(count: int) -> dict[str, list[str]]:
    """`count` LoCoMo turns and `count` Vaswani abstracts, the same every run."""
    turns = [r.text for c in load_conversations(LOCOMO) for r in c.story.records if r.kind == "source"]
    passages = [d.text for d in load_collection(VASWANI).docs]
    step_t, step_p = max(1, len(turns) // count), max(1, len(passages) // count)
    return {"short turns": turns[::step_t][:count], "long passages": passages[::step_p][:count]}


def speeds(texts: dict[str, list[str]], rounds: int) -> dict[str, dict[str, float]]:
    encoders = {b: load_encoder(b, model_dir()) for b in BACKENDS}
    for encoder in encoders.values():  # first calls pay one-off costs (allocation, kernels)
        encoder.encode(texts["short turns"][:16], BATCH)
    seen: dict[str, dict[str, list[float]]] = {b: {kind: [] for kind in texts} for b in BACKENDS}
    for _ in range(rounds):
        for kind, batch in texts.items():
            for backend, encoder in encoders.items():
                start = time.perf_counter()
                encoder.encode(batch, BATCH)
                seen[backend][kind].append(len(batch) / (time.perf_counter() - start))
    return {b: {kind: statistics.median(v) for kind, v in by_kind.items()} for b, by_kind in seen.items()}


def figures() -> dict[str, dict[str, float]]:
    names = [f"dense:backend={b}" for b in BACKENDS]
    vaswani = compare_collection(VASWANI, names, measures=("AP", "nDCG@10")).evaluation.aggregates
    locomo = compare_locomo(LOCOMO, names, packets=False).turn.evaluation.aggregates
    out = {}
    for backend, name in zip(BACKENDS, names):
        out[backend] = {"Vaswani AP": vaswani[name]["AP"], "Vaswani nDCG@10": vaswani[name]["nDCG@10"],
                        "LoCoMo nDCG@10": locomo[name]["nDCG@10"], "LoCoMo Success@5": locomo[name]["Success@5"]}
    return out


def measure(count: int, rounds: int, tolerance: float) -> dict:
    speed = speeds(samples(count), rounds)
    figs = figures()
    torch = figs["torch"]
    rows = {}
    for backend in BACKENDS:
        drift = {k: figs[backend][k] - torch[k] for k in torch}
        rows[backend] = {"texts_per_s": speed[backend],
                         "speedup": {k: speed[backend][k] / speed["torch"][k] for k in speed[backend]},
                         "figures": figs[backend], "difference_from_torch": drift,
                         "within_tolerance": all(abs(d) <= tolerance for d in drift.values())}
    eligible = [b for b in BACKENDS if rows[b]["within_tolerance"]]
    fastest = max(eligible, key=lambda b: min(rows[b]["speedup"].values()))
    return {"texts": count, "rounds": rounds, "batch_size": BATCH, "tolerance": tolerance,
            "backends": rows, "choice": fastest}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = measure(args.texts, args.rounds, args.tolerance)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.texts} texts of each kind, median of {args.rounds} rounds, batch {BATCH}")
    head = ["backend", "turns/s", "x", "passages/s", "x", "Vas AP", "Vas nDCG@10", "LoCoMo nDCG@10", "LoCoMo S@5"]
    print(" | ".join(head))
    for backend, row in result["backends"].items():
        s, x, f, d = row["texts_per_s"], row["speedup"], row["figures"], row["difference_from_torch"]
        cells = [backend, f"{s['short turns']:.0f}", f"{x['short turns']:.2f}", f"{s['long passages']:.0f}",
                 f"{x['long passages']:.2f}"]
        cells += [f"{f[k]:.4f} ({d[k]:+.4f})" for k in f]
        print(" | ".join(cells))
    print(f"fastest backend within {args.tolerance} of torch on every figure: {result['choice']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
