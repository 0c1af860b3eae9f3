"""A collection's vectors encoded by one process of a run, read by the others.

The workers share the user's embedding cache, so a text one of them has encoded the others
read back. But two modules that need the same collection at the same moment (Vaswani's
figures and Vaswani on the Milvus standalone) would both find it missing and both encode it,
each on half the cores. `encode_once` fills the cache under a lock named for the collection,
taken in the folder every worker of the run shares: the second module waits for the first,
then encodes nothing. On a platform without `fcntl` it runs unlocked, as before.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from garden.retrievers import Doc, make_retriever

try:
    import fcntl
except ImportError:  # Windows: no advisory locks of this kind
    fcntl = None


def run_folder(tmp_path_factory) -> Path:
    """The temporary folder this run's workers share (pytest-xdist gives each worker a folder
    of its own inside it); the run's own one without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def one_at_a_time(tmp_path_factory, name: str) -> Iterator[None]:
    """Held by one process of the run at a time, per `name`."""
    if fcntl is None:
        yield
        return
    with open(run_folder(tmp_path_factory) / f"{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def encode_once(tmp_path_factory, name: str, docs: Sequence[Doc], queries: Sequence[str]) -> int:
    """Put `dense`'s vectors of `docs` and `queries` in the user's cache, one process of the
    run at a time; how many texts this process encoded (0 where another did it first)."""
    with one_at_a_time(tmp_path_factory, name):
        dense = make_retriever("dense")
        dense.index(docs)
        dense.top_many(list(queries), 1)
        return dense.encoded + dense.queries_encoded
