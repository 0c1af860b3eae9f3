"""Bulk work: building or reading structures of hundreds of thousands of objects."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off for the block. A story load or an index build makes
    hundreds of thousands of objects and no cycle worth collecting, and every full
    collection re-walks all of them: at 100,000 records the collector alone cost 3 of a
    load's 7 seconds, and made the load grow faster than the store (experiments/scale.py).
    Reference counting still frees everything as usual."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
