"""Torch on a shared machine: its OpenMP threads spinning while they wait, or sleeping.

PyTorch's CPU build runs its products on GNU OpenMP threads, which by default spin for a
while at every barrier before they sleep (`OMP_WAIT_POLICY`, read once, when torch is
first imported). On a machine whose cores other processes also want, a spinning thread
holds a core the thread it waits for needs, and each barrier can cost a scheduler tick.
The ONNX sessions already sleep (docs/encoding.md); the garden now sets
`OMP_WAIT_POLICY=PASSIVE` before it first imports torch, unless the user set it
(`garden.retrievers._encoders.quiet_transformers`).

The policy cannot change inside a process once torch is loaded, so each measurement is a
process of its own; the two policies run interleaved, round by round, so a busy moment
of the machine falls on both. Each process times, after one untimed warm-up:

- `cross`: a cross-encoder reranking `bm25s`'s best 100 Vaswani abstracts for `--queries`
  queries (the tiny random model tests/tiny_models.py writes, unless `--cross DIR`);
- `dense:torch`: MiniLM (the packaged model) encoding 256 Vaswani abstracts on torch.

It prints, per workload, the median seconds of each policy over `--rounds` and the ratio
of the medians (spinning over sleeping), with the load average before and after.

    .venv/bin/python experiments/torch_waiting.py [--rounds 5] [--queries 10] [--cross DIR]

Run from the project's root, with the Vaswani collection at ../shared/data/vaswani.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
VASWANI = PROJECT.parent / "shared" / "data" / "vaswani"
POLICIES = ("PASSIVE", "ACTIVE")

ONE = r"""
import json, sys, time
from pathlib import Path
from garden.formats.corpora import load_collection
from garden.retrievers import make_retriever
workload, vaswani, cross, queries = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
collection = load_collection(vaswani)
texts = list(collection.queries.values())
if workload == "cross":
    retriever = make_retriever(f"cross:model={cross}:base=bm25s:depth=100")
    retriever.index(collection.docs)
    retriever.top_many(texts[:1])                         # untimed: the model loaded, first passes run
    start = time.perf_counter()
    retriever.top_many(texts[1:1 + queries])
else:
    from garden.retrievers._encoders import load_encoder
    from garden.retrievers.dense import model_dir
    encoder = load_encoder("torch", model_dir())
    docs = [d.text for d in collection.docs[:288]]
    encoder.encode(docs[:32], 32)                         # untimed
    start = time.perf_counter()
    encoder.encode(docs[32:], 32)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def _run(workload: str, policy: str, cross: Path, queries: int) -> float:
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", ONE, workload, str(VASWANI), str(cross), str(queries)],
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{workload} under {policy} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=10, help="queries the cross-encoder reranks in a run")
    parser.add_argument("--cross", type=Path, help="a CrossEncoder folder (default: tests/tiny_models.py's)")
    args = parser.parse_args()
    if not (VASWANI / "corpus").is_dir():
        raise SystemExit(f"the Vaswani collection is not at {VASWANI}")
    with tempfile.TemporaryDirectory() as scratch:
        cross = args.cross
        if cross is None:
            sys.path.insert(0, str(PROJECT / "tests"))
            from tiny_models import write_cross_encoder

            cross = write_cross_encoder(Path(scratch) / "cross-encoder")
        load = os.getloadavg()
        times: dict[tuple[str, str], list[float]] = {}
        for n in range(args.rounds):
            for workload in ("cross", "dense:torch"):
                for policy in (POLICIES if n % 2 == 0 else POLICIES[::-1]):   # neither always goes first
                    times.setdefault((workload, policy), []).append(_run(workload, policy, cross, args.queries))
    after = os.getloadavg()
    print(f"load average {load[0]:.1f} before, {after[0]:.1f} after; {args.rounds} rounds, medians")
    print(f"{'workload':<13} {'sleeping s':>10} {'spinning s':>10} {'spinning / sleeping':>20}")
    for workload in ("cross", "dense:torch"):
        passive, active = (statistics.median(times[(workload, p)]) for p in POLICIES)
        print(f"{workload:<13} {passive:>10.2f} {active:>10.2f} {active / passive:>20.2f}")


if __name__ == "__main__":
    main()
