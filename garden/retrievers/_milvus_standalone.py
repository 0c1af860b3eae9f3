"""A Milvus standalone (PyPI `milvus`, Milvus 2.3's C++ engine with its own etcd) on one
loopback port, in a data folder only its owner may enter.

Milvus 2.3 binds its proxy and every coordinator to all interfaces (`*:PORT`, whatever
`proxy.ip` says; only its etcd binds 127.0.0.1) and fixes a dozen ports (etcd's 2379 and
2380 among them), so two could not run side by side. Here it runs in a network namespace
of its own (`unshare --net`), where the only interface is its own loopback: nothing it
opens is reachable from anywhere else, and every instance has the default ports to
itself. The one way in is a socket this process binds to 127.0.0.1:PORT in the caller's
namespace before entering the new one and hands down: inside, each connection accepted on
it is relayed to the proxy at 127.0.0.1:19530 of the namespace. A mount namespace gives it
a private /run, where Milvus 2.3 keeps its pid file whatever it is told. The socket starts
listening only when Milvus reports itself healthy, so a client that connects is answered.

    python -m garden.retrievers._milvus_standalone --data DIR --port 19530

runs one in the foreground until SIGTERM or SIGINT, which stop Milvus (SIGKILL past
STOP_TIMEOUT); if the process that started it dies, it stops too. DIR is made 0700 and
everything in it owner-only (umask 077): the decompressed engine, its etcd, its segments
and its logs (`DIR/logs`). Entering the namespaces needs root, or unprivileged user
namespaces (`unshare --user --map-root-user --net --mount`, tried when not root).
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import importlib.util
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

INSTALL_HINT = "pip install -e '.[milvus]'"
MODULE = "garden.retrievers._milvus_standalone"
PROXY_PORT = 19530  # inside the namespace: Milvus's own defaults, never seen outside it
HEALTH_URL = "http://127.0.0.1:9091/healthz"
START_TIMEOUT = 300.0  # seconds for Milvus to report itself healthy (about 40 s on two idle cores)
STOP_TIMEOUT = 10.0  # seconds for Milvus to exit after SIGTERM, before it is killed
RELAY_BYTES = 1 << 16
COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexCoord", "indexNode", "dataCoord", "dataNode")
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def installed() -> bool:
    """Whether the `milvus` package (the standalone's engine) is importable."""
    return importlib.util.find_spec("milvus") is not None


def unshare_command() -> list[str]:
    """`unshare` into new network and mount namespaces: as root directly, else inside a
    user namespace."""
    spaces = ["--net", "--mount"]
    return ["unshare", *spaces] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", *spaces]


def private_folder(path: Path) -> Path:
    """`path` made (0700) or checked: a folder of this user's that nobody else may enter;
    a link or another's folder is refused (ValueError, one line)."""
    path = Path(path).absolute()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{path}: not a folder (a link?); the standalone's data folder must be a real folder")
    if st.st_uid != os.geteuid():
        raise ValueError(f"{path}: another user's folder; the standalone's data folder must be this user's")
    os.chmod(path, 0o700)
    return path


def _die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Be sent `sig` when the process that started this one exits (Linux prctl)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _private_run() -> None:
    """A private, empty /run in this (new) mount namespace: Milvus 2.3 writes and locks its
    pid file at /run/milvus/standalone.pid whatever MILVUS_RUN_DIR says, which would leave a
    file outside its data folder and make two standalones contend for one lock."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", b"/run", b"tmpfs", 0, b"mode=0700") != 0:
        raise OSError(ctypes.get_errno(), f"cannot mount a private /run: {os.strerror(ctypes.get_errno())}")


def _loopback_up() -> None:
    """Bring up `lo` in this (new) network namespace: a fresh namespace has it down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def _configure(base: Path) -> Path:
    """Milvus's configuration under `base` (its package's template, every component
    advertised on 127.0.0.1, data and logs under `base`) and its engine decompressed
    there: the executable's path."""
    import milvus

    config = milvus.MilvusServerConfig(data_dir=str(base))
    for component in COMPONENTS:
        config.set(f"{component}.ip", "127.0.0.1")
    config.resolve()
    milvus._initialize_data_files(str(base))
    # it copies its files' modes and makes its engine 0755, whatever the umask: owner-only
    from garden.retrievers._milvus import _owner_only

    _owner_only(base)
    return base / "bin" / "milvus"


def _healthy(proc: subprocess.Popen, deadline: float, stopping: threading.Event) -> bool:
    while time.monotonic() < deadline and proc.poll() is None and not stopping.is_set():
        try:
            with urllib.request.urlopen(HEALTH_URL, timeout=2) as answer:
                if b"OK" in answer.read():
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(RELAY_BYTES):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _relay(outside: socket.socket) -> None:
    """Each connection accepted on `outside` (the caller's loopback) joined to Milvus's
    proxy in this namespace, a thread each way, until either side closes."""
    while True:
        client, _ = outside.accept()
        try:
            proxy = socket.create_connection(("127.0.0.1", PROXY_PORT))
        except OSError:
            client.close()
            continue
        for sock in (client, proxy):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(client, proxy), daemon=True).start()
        threading.Thread(target=_pump, args=(proxy, client), daemon=True).start()


def inside(base: Path, fd: int) -> int:
    """In the new namespace: Milvus started and watched, the handed-down socket relayed
    to it once healthy; SIGTERM, SIGINT or the starter's exit stop it."""
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    _die_with_parent()
    if os.getppid() == 1:  # the starter died before this process could follow it
        return 0
    os.umask(0o077)
    _loopback_up()
    _private_run()
    outside = socket.socket(fileno=fd)
    executable = _configure(base)
    env = {**os.environ, "DEPLOY_MODE": "STANDALONE", "METRICS_PORT": "9091", "MILVUS_RUN_DIR": str(base / "run"),
           "LD_LIBRARY_PATH": f"{executable.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    with open(base / "logs" / "milvus-stdout.log", "ab") as out, open(base / "logs" / "milvus-stderr.log", "ab") as err:
        proc = subprocess.Popen([str(executable), "run", "standalone"], cwd=base, env=env, stdout=out, stderr=err,
                                preexec_fn=_die_with_parent)
    if not _healthy(proc, time.monotonic() + START_TIMEOUT, stopping):
        stop_process(proc)
        if stopping.is_set():
            return 0
        print(f"milvus standalone did not report healthy; see {base / 'logs'}", file=sys.stderr)
        return 1
    outside.listen(64)
    threading.Thread(target=_relay, args=(outside,), daemon=True).start()
    while not stopping.wait(0.5):
        if proc.poll() is not None:
            print(f"milvus standalone exited ({proc.returncode}); see {base / 'logs'}", file=sys.stderr)
            return 1
    stop_process(proc)
    return 0


def stop_process(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL past `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(data: Path, port: int) -> None:
    """Bind 127.0.0.1:`port` here, then become the standalone inside a new network
    namespace (this process's id stays the one to signal)."""
    base = private_folder(data)
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.set_inheritable(True)
    os.execvp(unshare_command()[0], [*unshare_command(), sys.executable, "-m", MODULE, "--inside",
                                     "--fd", str(listener.fileno()), "--data", str(base)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="its data folder (made 0700 if absent)")
    ap.add_argument("--port", type=int, default=PROXY_PORT, help="the port on 127.0.0.1 it answers on")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inside:
        return inside(args.data, args.fd)
    if not installed():
        print(f"the Milvus standalone needs the milvus package; install with `{INSTALL_HINT}`", file=sys.stderr)
        return 2
    try:
        serve(args.data, args.port)
    except (OSError, ValueError) as exc:
        print(f"milvus standalone: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
