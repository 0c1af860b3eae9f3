"""A time limit on one request's work, set by whoever serves it and checked where the work
can stop cleanly: between the stages of a structured pipeline, and between the earlier
queries a session runs again. Nothing is interrupted halfway; a check past the limit raises
`DeadlineExceeded` and the request is refused whole.

The limit lives in a context variable, so it belongs to the thread or task running the
request (a server's worker thread), never to the process: the library, a notebook or the
command line run with none."""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from garden.errors import GardenError

_LIMIT: ContextVar[tuple[float, float] | None] = ContextVar("garden_deadline", default=None)


class DeadlineExceeded(GardenError):
    """The request ran past the time its server allows one request."""


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Work inside the block must finish within `seconds` (None: no limit)."""
    token = _LIMIT.set(None if seconds is None else (time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def check_deadline() -> None:
    """DeadlineExceeded when the current block's limit has passed; nothing otherwise."""
    limit = _LIMIT.get()
    if limit is not None and time.monotonic() > limit[0]:
        raise DeadlineExceeded(f"the request ran past the server's limit of {limit[1]:g} s a request "
                               "(garden serve --deadline); it was stopped and nothing was served")
