"""A `milvus-lite server` of one's own on a free loopback port: the stand-in for a Milvus
server that the tests and the benchmarks start when none is named. It binds the loopback
only: the server has no authentication."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from garden.errors import GardenError

START_TIMEOUT = 60.0   # seconds for the server to accept a connection
STOP_TIMEOUT = 30.0    # seconds for it to exit after SIGTERM, before it is killed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_local_server(data_dir: Path, log: Path | None = None, attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """`milvus-lite server` serving `data_dir` on a free loopback port, once it accepts
    connections: (the process, its URI). Its output goes to `log` (appended), else nowhere.
    A port taken between choosing it and binding it is tried again, `attempts` times."""
    for _ in range(attempts):
        port = _free_port()
        with open(log, "ab") if log else open(os.devnull, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data_dir),
                                     "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=out)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return proc, f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.2)
        stop_local_server(proc)
    raise GardenError("milvus-lite server did not start on a loopback port"
                      + (f"; see {log}" if log else ""))


def stop_local_server(proc: subprocess.Popen) -> None:
    """Stop a server `start_local_server` started: SIGTERM, then SIGKILL past STOP_TIMEOUT."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
