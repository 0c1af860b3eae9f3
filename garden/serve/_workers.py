"""Several processes answering on one port: the server's workers.

A query is Python from end to end, so one process answers one query at a time whatever
the threads (the interpreter's lock); on a machine of two cores, a second process answers
a second query beside the first. The pre-fork model of classic servers: the parent binds
the socket and forks `n` workers before anything heavy is loaded (no thread, no model, no
native library yet, so nothing is copied half-made); each worker loads and warms its own
stories, indexes and model, then accepts on the shared socket, and the kernel hands each
connection to one of them. What the workers share is on disk or in memory made before the
fork: the trace (each line one `write` in append mode, so lines from two workers never
interleave), the embedding cache (SQLite, safe across processes) and the server's counts
(`Counts`).

The parent only waits: it prints nothing until every worker has said it is ready, and when
one worker dies unasked, it stops the others and exits with an error rather than serve on
with fewer than it was told. SIGINT and SIGTERM are passed on to the workers, which finish
the requests in flight (uvicorn's graceful shutdown) and exit.

A worker never outlives its parent: each holds the read end of a pipe whose only write end
the parent keeps, and a thread of the worker waits on it. However the parent ends (SIGKILL
included), the kernel closes its end, the read returns, and the worker stops as on SIGTERM,
or at once if it has not stopped within the graceful shutdown's time. An orphaned worker
would keep serving on the port with nobody to stop it or count it.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

from garden.errors import GardenError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
ORPHAN_GRACE = 12.0   # seconds an orphaned worker has to stop by itself (the graceful shutdown takes up to 10)


def can_fork() -> bool:
    return hasattr(os, "fork")


def _exit_cleanly(signum, frame) -> None:
    raise SystemExit(0)


def _stop_with_parent(life_fd: int) -> None:
    """In the child: a thread that waits for the parent's end of the pipe to close, then
    stops this worker (SIGTERM to itself, then exit if that was not enough)."""

    def watch() -> None:
        while True:
            try:
                if not os.read(life_fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE)
        os._exit(1)

    threading.Thread(target=watch, name="garden-parent-watch", daemon=True).start()


def _worker(work: Callable[[int, Callable[[], None]], None], index: int, ready_fd: int, life_fd: int) -> None:
    """In the child: run `work(index, ready)`, `ready()` telling the parent the worker answers.
    Never returns: the child exits here, whatever happens, without the parent's clean-up."""
    code = 0
    try:
        _stop_with_parent(life_fd)
        for sig in STOP_SIGNALS:
            # asked to stop before uvicorn runs (still warming), or after it (uvicorn hands
            # the signal it shut down on back to this handler): a clean exit either way
            signal.signal(sig, _exit_cleanly)

        def ready() -> None:
            os.write(ready_fd, b"1")
            os.close(ready_fd)

        work(index, ready)
    except GardenError as exc:
        print(f"garden: {exc.messages[0] if exc.messages else exc}", file=sys.stderr, flush=True)
        code = 2
    except BaseException as exc:   # noqa: BLE001 - a worker reports and exits; it never returns to the parent's code
        if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            print(f"garden: a server worker failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_workers(n: int, work: Callable[[int, Callable[[], None]], None], on_ready: Callable[[], None]) -> int:
    """Fork `n` workers, the i-th running `work(i, ready)`; call `on_ready()` once all of them
    have called `ready()`, then wait. Returns the exit code: 0 when stopped by a signal
    and every worker exited cleanly, else non-zero (a worker that failed to start, or died)."""
    read_fd, write_fd = os.pipe()
    life_read, life_write = os.pipe()   # only the parent keeps life_write: its end is the workers' signal
    children: list[int] = []
    for index in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            os.close(life_write)
            _worker(work, index, write_fd, life_read)
        children.append(pid)
    os.close(write_fd)
    os.close(life_read)
    stopping = False

    def stop(signum, frame) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        ready = 0
        while ready < n:
            got = os.read(read_fd, n)
            if not got:   # every worker's end closed before all said ready: one failed
                break
            ready += len(got)
        os.close(read_fd)
        if ready == n and not stopping:
            on_ready()
        else:
            stop(None, None)
        code = 0
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            children.remove(pid)
            exit_code = os.waitstatus_to_exitcode(status)
            if exit_code != 0 or not stopping:
                code = code or (exit_code if exit_code > 0 else 1)
                if not stopping:
                    print(f"garden: a server worker (pid {pid}) exited with {exit_code}; stopping the others",
                          file=sys.stderr, flush=True)
                stop(None, None)
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(life_write)
