"""How far the `dense` vectors, and the figures pinned on them, move between processors.

ONNX Runtime picks its kernels by what the processor offers (AVX2, AVX-512, VNNI, AMX), and
so does NumPy. The int8 products are exact on every one of them (7-bit weights,
docs/encoding.md), but the float operations between them (layer norms, softmax, GELU, the
attention products) round differently, and one rounding that lands on the other side of a
half step in a token's 8-bit activations moves that token's product by a whole step. This
study measures that, in three parts:

1. Kernels. The same sample of texts (Vaswani passages and queries, LoCoMo turns,
   LongMemEval turns, spread evenly over each source) is encoded natively and, in a child
   process, under `qemu-x86_64 -cpu MODEL` for each `--emulate` model: the emulated processor
   answers CPUID as that model does, so ONNX Runtime and NumPy choose that model's kernels
   (Haswell: AVX2 and FMA, no AVX-512, no VNNI). Emulation is about 500 times slower, hence
   the small sample. For each model: the share of vectors bit-identical to the native ones,
   and 1 - cosine (median, 99th percentile, largest).
2. Backends. The same sample under `torch`, `onnx` and `onnx-int8`, natively, against torch.
3. Figures. Vaswani `dense` (AP, nDCG@10, R@1000 over its 93 queries, judged by the
   collection's relevance judgments) from the native vectors, and `--seeds` simulated other
   processors: every passage and query vector moved by a difference vector drawn (seeded)
   from those measured in part 1 between the native and the emulated vectors of the same
   kind, renormalized. The spread of the simulated figures around the native one is the
   tolerance a pinned figure needs between machines; the figure measured on another kind of
   processor (docs/encoding.md) should fall inside it.
4. With `--pinned`: every figure the suite pins from encoded vectors, computed on this
   processor as the tests compute it (Vaswani `dense`; LoCoMo's seven conversations,
   `default` at turn level and its packet; LongMemEval's 13-question development subset), to
   set beside the same figures recorded on another kind of processor.

    .venv/bin/python experiments/encoder_spread.py [--texts 40] [--emulate Haswell] [--seeds 20]
        [--work DIR] [--pinned | --only-pinned] [--json]

Needs `qemu-x86_64` (Debian's qemu-user) for part 1; without it part 1 is skipped and part 3
has nothing to draw from. Vaswani: ../shared/data/vaswani. LoCoMo: Maharana et al., ACL 2024,
CC BY-NC 4.0. LongMemEval: Wu et al., ICLR 2025 (MIT). All read from ../shared/data.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

from experiments.harness.benchmarks import arguments, at_least_one, text_samples, write_development_subset  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.measures import evaluate  # noqa: E402
from garden.formats.corpora import load_collection  # noqa: E402
from garden.retrievers.dense import BACKENDS, DEFAULT_BACKEND, load_encoder, model_dir  # noqa: E402

BATCH = 64   # what `dense` encodes at (experiments/encoder_backends.py times the same)
BENCHMARKS = ("vaswani", "locomo", "longmemeval")

DEPTH = 1000
MEASURES = ("AP", "nDCG@10", "R@1000")
SHOWN = ("SSE42", "AVX", "FMA3", "AVX2", "AVX512F", "AVX512_SKX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR",
         "AVX512VNNI")  # NumPy's names for the extensions that choose kernels


def sample_texts(count: int, paths: dict[str, str]) -> dict[str, list[str]]:
    """`count` texts of each kind (Vaswani queries: every `count`-th of the 93, in id order)."""
    kinds = text_samples(count, paths["locomo"], paths["vaswani"], paths["longmemeval"])
    queries = load_collection(paths["vaswani"]).queries
    ordered = [queries[q] for q in sorted(queries, key=int)]
    kinds["Vaswani queries"] = ordered[:: max(1, len(ordered) // count)][:count]
    return kinds


def encode_sample(count: int, backend: str, out: Path, paths: dict[str, str]) -> None:
    """The child's work: the sample's vectors under `backend`, saved as arrays (no pickle)."""
    encoder = load_encoder(backend, model_dir())
    texts = sample_texts(count, paths)
    np.savez(out, **{kind: encoder.encode(batch, BATCH) for kind, batch in texts.items()})


def cpu_features(emulate: str | None) -> list[str]:
    """The SIMD extensions NumPy finds on the processor (the emulated one under qemu)."""
    code = ("import numpy, json; from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(json.dumps(sorted(k for k, v in f.items() if v)))")
    argv = ([*qemu(emulate)] if emulate else []) + [sys.executable, "-c", code]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return []
    return [f for f in found if f in SHOWN]


def qemu(model: str) -> list[str]:
    return ["qemu-x86_64", "-cpu", model]


def child(count: int, backend: str, out: Path, emulate: str | None, paths: dict[str, str]) -> None:
    argv = [sys.executable, str(HERE), "--child", str(out), "--texts", str(count), "--backend", backend,
            *(f"--{b}={path}" for b, path in paths.items())]
    if emulate:
        argv = qemu(emulate) + argv
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if "TCG doesn't support" not in line][-5:]
        raise SystemExit(f"encoding under {emulate or 'the native processor'} failed: " + " | ".join(tail))


def difference(native: np.ndarray, other: np.ndarray) -> dict[str, float]:
    cos = np.clip((native * other).sum(axis=1), -1.0, 1.0)
    gap = 1.0 - cos
    return {"vectors": int(len(native)), "identical": float(np.mean(np.all(native == other, axis=1))),
            "one_minus_cos_median": float(np.median(gap)), "one_minus_cos_p99": float(np.quantile(gap, 0.99)),
            "one_minus_cos_max": float(gap.max()), "largest_abs": float(np.abs(native - other).max())}


def kernels(count: int, models: list[str], work: Path,
            paths: dict[str, str]) -> tuple[dict, dict[str, dict[str, np.ndarray]]]:
    """Part 1: the sample natively and under each emulated model; the measured differences."""
    native_file = work / "native.npz"
    child(count, DEFAULT_BACKEND, native_file, None, paths)
    native = dict(np.load(native_file))
    rows = {"native": {"features": cpu_features(None)}}
    moved: dict[str, dict[str, np.ndarray]] = {}
    for model in models:
        file = work / f"{model}.npz"
        child(count, DEFAULT_BACKEND, file, model, paths)
        got = dict(np.load(file))
        rows[model] = {"features": cpu_features(model),
                       "by_kind": {kind: difference(native[kind], got[kind]) for kind in native}}
        moved[model] = {kind: got[kind] - native[kind] for kind in native}
    return rows, moved


def backends(count: int, work: Path, paths: dict[str, str]) -> dict:
    """Part 2: every backend natively, against torch's vectors."""
    got = {}
    for backend in BACKENDS:
        file = work / f"backend-{backend}.npz"
        child(count, backend, file, None, paths)
        got[backend] = dict(np.load(file))
    return {b: {kind: difference(got["torch"][kind], got[b][kind]) for kind in got[b]} for b in BACKENDS[1:]}


def ranked(queries: np.ndarray, docs: np.ndarray, qids: list[str], dids: list[str]) -> dict:
    """Each query's top DEPTH documents by cosine, ties by document id."""
    order = np.argsort(np.array(dids))
    rank_of_id = np.empty(len(dids), dtype=np.int64)
    rank_of_id[order] = np.arange(len(dids))
    run = {}
    for qid, vector in zip(qids, queries):
        scores = docs @ vector   # one product per query: as `dense` ranks (garden/retrievers/dense.py)
        top = np.lexsort((rank_of_id, -scores))[:DEPTH]
        run[qid] = [(dids[i], float(scores[i])) for i in top]
    return run


def moved_by(vectors: np.ndarray, moves: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    shifted = vectors + moves[rng.integers(0, len(moves), size=len(vectors))]
    return shifted / np.linalg.norm(shifted, axis=1, keepdims=True)


def figures(moved: dict[str, dict[str, np.ndarray]], seeds: int, vaswani: str) -> dict:
    """Part 3: Vaswani `dense` from the native vectors and from simulated other processors."""
    collection = load_collection(vaswani)
    qids = sorted(collection.judged_queries, key=int)
    dids = [d.id for d in collection.docs]
    encoder = load_encoder(DEFAULT_BACKEND, model_dir())
    docs = encoder.encode([d.text for d in collection.docs], BATCH)
    queries = encoder.encode([collection.queries[q] for q in qids], BATCH)
    native = evaluate(collection.qrels, {"native": ranked(queries, docs, qids, dids)}, MEASURES).aggregates["native"]
    out = {"native": native, "simulated": {}}
    for model, by_kind in moved.items():
        runs = {}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            runs[str(seed)] = ranked(moved_by(queries, by_kind["Vaswani queries"], rng),
                                     moved_by(docs, by_kind["Vaswani passages"], rng), qids, dids)
        got = evaluate(collection.qrels, runs, MEASURES).aggregates
        spread = {}
        for m in MEASURES:
            values = np.array([got[s][m] for s in runs])
            spread[m] = {"min": float(values.min()), "median": float(np.median(values)), "max": float(values.max()),
                         "largest_move": float(np.abs(values - native[m]).max())}
        out["simulated"][model] = spread
    return out


def pinned(paths: dict[str, str]) -> dict[str, float]:
    """Part 4: the suite's pinned figures on this processor (tests/test_vaswani.py,
    tests/test_locomo_compare.py, tests/test_longmemeval_dev.py compute them so)."""
    from garden.evaluation.compare import compare_collection
    from garden.evaluation.locomo import compare_locomo
    from garden.evaluation.longmemeval import compare_longmemeval

    vaswani = compare_collection(paths["vaswani"], ["dense"], measures=("AP", "R@1000")).evaluation.aggregates["dense"]
    out = {"Vaswani dense AP": vaswani["AP"], "Vaswani dense R@1000": vaswani["R@1000"]}
    locomo = compare_locomo(paths["locomo"], ["bm25s", "default"], "bm25s", permutations=20,
                            negatives="foreign").to_json()
    turn, groups = locomo["turn"]["pipelines"]["default"], locomo["packet"]["groups"]["default"]
    out.update({f"LoCoMo default {m}": turn[m] for m in ("Success@1", "Success@5", "nDCG@10")})
    out["LoCoMo answered"] = groups["answerable"]["answered"]
    out["LoCoMo negatives answered"] = groups["negatives"]["answered"]
    with tempfile.TemporaryDirectory() as scratch:
        subset = write_development_subset(paths["longmemeval"], Path(scratch) / "subset.json")
        lme = compare_longmemeval(subset, ["bm25s", "default"], "bm25s", permutations=20).to_json()
    for level in ("turn", "session"):
        got = lme[level]["pipelines"]["default"]
        out.update({f"LongMemEval {level} {m}": got[m] for m in ("nDCG@10", "Success@5")})
    packet = lme["packet"]["groups"]["default"]["answerable"]
    out.update({"LongMemEval answered": packet["answered"], "LongMemEval covered": packet["evidence_covered"]})
    return out


def report(result: dict) -> str:
    lines = ["Kernels: the sample's int8 vectors, native against each emulated processor"]
    native = result["kernels"]["native"]["features"]
    lines.append(f"  native finds: {' '.join(native) or '?'}")
    for model, row in result["kernels"].items():
        if model == "native":
            continue
        lines.append(f"  {model} (finds: {' '.join(row['features']) or '?'})")
        for kind, d in row["by_kind"].items():
            lines.append(f"    {kind:<18} identical {d['identical']:5.0%}  1-cos median {d['one_minus_cos_median']:.1e}"
                         f"  p99 {d['one_minus_cos_p99']:.1e}  max {d['one_minus_cos_max']:.1e}")
    lines.append("Backends against torch (native)")
    for backend, by_kind in result["backends"].items():
        for kind, d in by_kind.items():
            lines.append(f"  {backend:<10} {kind:<18} 1-cos median {d['one_minus_cos_median']:.1e}"
                         f"  max {d['one_minus_cos_max']:.1e}")
    fig = result["figures"]
    lines.append("Vaswani dense: native, and simulated other processors (min / median / max, largest move)")
    lines.append("  native  " + "  ".join(f"{m} {fig['native'][m]:.4f}" for m in MEASURES))
    for model, spread in fig["simulated"].items():
        for m, s in spread.items():
            lines.append(f"  {model:<8} {m:<8} {s['min']:.4f} / {s['median']:.4f} / {s['max']:.4f}"
                         f"  largest move {s['largest_move']:.4f}")
    if "pinned" in result:
        lines.append("Pinned figures on this processor")
        lines += [f"  {name:<32} {value:.4f}" for name, value in result["pinned"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=at_least_one("texts a kind: a whole number, at least 1"), default=40,
                        help="texts of each kind in the sample")
    parser.add_argument("--emulate", default="Haswell", help="qemu CPU models, comma-separated")
    parser.add_argument("--seeds", type=at_least_one("seeds: a whole number, at least 1"), default=20,
                        help="simulated processors for the figures")
    parser.add_argument("--work", type=Path, help="keep the vectors here (default: a scratch folder)")
    parser.add_argument("--pinned", action="store_true", help="also the suite's pinned figures (minutes)")
    parser.add_argument("--only-pinned", action="store_true", help="only the pinned figures: no emulation")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--backend", default=DEFAULT_BACKEND, help=argparse.SUPPRESS)
    args = arguments(parser, BENCHMARKS, argv, out=False)
    paths = {b: getattr(args, b) for b in BENCHMARKS}
    if args.child:
        encode_sample(args.texts, args.backend, args.child, paths)
        return 0
    if args.only_pinned:
        print(json.dumps(pinned(paths), indent=1))
        return 0
    models = [m for m in args.emulate.split(",") if m] if shutil.which("qemu-x86_64") else []
    work = args.work or Path(tempfile.mkdtemp(prefix="encoder-spread-"))
    work.mkdir(parents=True, exist_ok=True)
    rows, moved = kernels(args.texts, models, work, paths)
    result = {"texts": args.texts, "seeds": args.seeds, "kernels": rows,
              "backends": backends(args.texts, work, paths), "figures": figures(moved, args.seeds, paths["vaswani"])}
    if args.pinned:
        result["pinned"] = pinned(paths)
    write_json(work / "encoder_spread.json", result, indent=1)
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
