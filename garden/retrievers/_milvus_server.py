"""A Milvus server of one's own on a free loopback port, for the tests and the benchmarks
when none is named: a `milvus-lite server` (`start_local_server`), or a Milvus standalone
(`start_standalone`, garden.retrievers._milvus_standalone). Each binds the loopback only:
neither has authentication."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from garden.errors import GardenError
from garden.retrievers._milvus_standalone import stop_process

START_TIMEOUT = 60.0   # seconds for the server to accept a connection
STANDALONE_TIMEOUT = 360.0  # seconds for a standalone to accept one (about 40 s on two idle cores)
STOP_TIMEOUT = 30.0    # seconds for it to exit after SIGTERM, before it is killed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_local_server(data_dir: Path, log: Path | None = None, attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """`milvus-lite server` serving `data_dir` on a free loopback port, once it accepts
    connections: (the process, its URI). Its output goes to `log` (appended), else nowhere.
    A port taken between choosing it and binding it is tried again, `attempts` times."""
    return _start("milvus-lite server", lambda port: [
        sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data_dir), "--host", "127.0.0.1",
        "--port", str(port)], START_TIMEOUT, log, attempts)


def start_standalone(data_dir: Path, log: Path | None = None, attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """A Milvus standalone serving `data_dir` (made 0700) on a free loopback port, once it
    accepts connections (about 40 s): (the process, its URI), as `start_local_server`."""
    return _start("milvus standalone", lambda port: [
        sys.executable, "-m", "garden.retrievers._milvus_standalone", "--data", str(data_dir), "--port", str(port)],
        STANDALONE_TIMEOUT, log, attempts)


def _start(what: str, command, timeout: float, log: Path | None, attempts: int) -> tuple[subprocess.Popen, str]:
    for _ in range(attempts):
        port = _free_port()
        with open(log, "ab") if log else open(os.devnull, "wb") as out:
            proc = subprocess.Popen(command(port), stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return proc, f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.2)
        stop_local_server(proc)
    raise GardenError(f"{what} did not start on a loopback port" + (f"; see {log}" if log else ""))


def stop_local_server(proc: subprocess.Popen) -> None:
    """Stop a server `start_local_server` or `start_standalone` started: SIGTERM, then
    SIGKILL past STOP_TIMEOUT."""
    stop_process(proc, STOP_TIMEOUT)
