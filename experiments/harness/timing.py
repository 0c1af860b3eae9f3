"""Timing, one way everywhere.

- The clock is `time.perf_counter`; `timed` measures one call.
- `interleaved`: every round takes each item in turn and runs every subject on it, one
  after the other, so a slow moment of a shared machine falls on all of them and a ratio
  to a reference run in the same rounds is fair (`query_rounds`: pipelines on query specs).
- One percentile definition: numpy's default, linear interpolation between the two
  closest ranks (`np.percentile(values, q)`, Hyndman and Fan's type 7). The p50 is the
  median, the p95 `percentile(values, 95)`. Figures taken before this rule as the nearest
  rank (the value at place round(q (n - 1)) in order, counting from 0) say so where the
  docs quote them (docs/serve.md, docs/milvus.md).
- Peak memory is the process's maximum resident set (`ru_maxrss`), in MB.
"""
from __future__ import annotations

import resource
import sys
import time
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

import numpy as np

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def timed(make: Callable[[], T]) -> tuple[float, T]:
    """(seconds `make()` took, what it returned)."""
    start = time.perf_counter()
    value = make()
    return time.perf_counter() - start, value


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0 to 100) by the one definition of the module docstring."""
    if not len(values):
        raise ValueError("a percentile of no values")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def spread(values: Sequence[float]) -> dict[str, float]:
    """{"p50", "p95"} of `values`, in their unit."""
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def interleaved(rounds: int, items: Iterable, subjects: Sequence[K],
                measure: Callable[[K, object], T]) -> dict[K, list[T]]:
    """subject -> what `measure(subject, item)` gave, for every item of every round, the
    subjects taking turns on each item (the module docstring)."""
    items = list(items)
    out: dict[K, list[T]] = {s: [] for s in subjects}
    for _ in range(rounds):
        for item in items:
            for subject in subjects:
                out[subject].append(measure(subject, item))
    return out


def query_rounds(rounds: int, specs: Sequence, pipelines: dict) -> tuple[dict[str, list[float]], dict]:
    """Each pipeline's `run(spec)` over every spec, `rounds` times, interleaved: (name ->
    milliseconds per run, name -> stage -> the milliseconds each outcome's timings report)."""
    stages: dict[str, dict[str, list[float]]] = {name: {} for name in pipelines}

    def run_ms(name: str, spec) -> float:
        seconds, outcome = timed(lambda: pipelines[name].run(spec))
        for stage, ms in outcome.timings_ms.items():
            stages[name].setdefault(stage, []).append(ms)
        return seconds * 1e3
    return interleaved(rounds, specs, list(pipelines), run_ms), stages


def peak_mb() -> float:
    """This process's maximum resident set so far, MB (Linux reports KB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


# Prepended to the code a fresh interpreter runs when an experiment times each step of a
# command as it meets it: `mark(name)` records the seconds since the previous mark.
STEP_TIMER = r"""
import json, sys, time
t0 = time.perf_counter()
marks = {}
def mark(name):
    global t0
    now = time.perf_counter(); marks[name] = now - t0; t0 = now
"""
