"""`garden serve`: one long-lived process answering queries, its stories and model kept warm.

Over HTTP (Starlette on uvicorn, `garden.serve.http`) by default, MCP over Streamable HTTP
at `/mcp` beside it; with ``mcp=True``, as an MCP server over stdio (`garden.serve.mcp`),
for an agent to call. Either way each packet is
exactly what `garden query --json` prints for the same inputs, and each query is written to
the trace as that command writes it, so `garden compare`, `judge` and `capture` read a served
day like any other. See docs/serve.md.

Who may ask (docs/serve.md, "Who may ask"): the server binds a loopback address, answers
only requests that name it by a loopback name (or one the operator allowed) and carry no
foreign `Origin`, and beyond loopback (``allow_remote``) only requests that carry the token
the operator keeps in a private file. What is served is the operator's: the stories and the
pipelines (with their options, engines and paths) are named when it starts, and a request
picks among them by name.
"""
from __future__ import annotations

import json
import os
import select
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from garden._notice import warn
from garden.errors import GardenError
from garden.serve._access import is_loopback
from garden.serve._core import DEFAULT_DEADLINE, DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT
# what an in-process benchmark drives (experiments/serve_writes.py): the served garden over its
# shelf of stories, and a write through the same door a request takes
from garden.serve._core import Garden, Shelf, served_pipelines
from garden.serve._writes import Writing, remember

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Garden", "Shelf", "Writing", "is_loopback", "remember", "serve",
           "served_pipelines"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_WORKERS = 64
LISTEN_BACKLOG = 128   # connections the kernel holds before one is accepted
STARTUP_WAIT = 30.0    # seconds an MCP server that cannot start waits for its client's first request
INTERNAL_ERROR = -32603   # JSON-RPC's code for an error of the server's own


def check_address(host: str, port: int, allow_remote: bool, token_file: str | Path | None = None) -> None:
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise GardenError(f"`port`: a TCP port is a whole number from 0 to 65535 (0: any free port), got {port!r}")
    if not is_loopback(host) and not allow_remote:
        raise GardenError(f"`host` {host}: not a loopback address; pass --allow-remote (with --token-file) to "
                          "serve beyond this machine")
    if allow_remote and token_file is None:
        raise GardenError("`allow_remote`: beyond loopback every request must carry a token: name the file that "
                          "holds it with --token-file (one line, the file private to you)")


def _check_limit(name: str, value, low: float, high: float, what: str = "a number of seconds") -> None:
    whole = what.startswith("a whole number")
    if isinstance(value, bool) or not isinstance(value, (int,) if whole else (int, float)) \
            or not low <= value <= high:
        raise GardenError(f"`{name}`: {what} from {low:g} to {high:g}, got {value!r}")


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free port the system picks)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise GardenError(f"`host` {host}: not an address this machine can bind: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise GardenError(f"`port` {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextmanager
def _stdout_to_stderr():
    """Anything written to stdout (by the garden, a library it loads, or C code below them)
    goes to stderr instead, for as long as the block runs: in MCP mode stdout is the wire."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def refuse_first_request(reason: str, wait: float = STARTUP_WAIT) -> None:
    """An MCP server over stdio that cannot start answers its client's first request (the
    `initialize` a host sends at once) with a JSON-RPC error carrying the reason, before it
    exits: otherwise the client sees only the connection close, and the reason is on a
    stderr the user may never read. Standard library only: the failure may be that the SDK
    is missing."""
    request_id = None
    try:
        ready, _, _ = select.select([sys.stdin], [], [], wait)
        line = sys.stdin.buffer.readline() if ready else b""
        message = json.loads(line) if line.strip() else None
        if isinstance(message, dict) and isinstance(message.get("id"), (str, int)) \
                and not isinstance(message.get("id"), bool):
            request_id = message["id"]
    except (OSError, ValueError):   # no stdin to read, or a first line that is no message: no id to answer
        pass
    reply = {"jsonrpc": "2.0", "id": request_id,
             "error": {"code": INTERNAL_ERROR, "message": f"garden serve cannot start: {reason}"}}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def _require(*modules: str) -> None:
    """GardenError naming what to install when a package the server needs is missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise GardenError(f"garden serve needs {', '.join(missing)}, not installed here: "
                          f"pip install {' '.join(missing)}")


def _accepting_one_at_a_time():
    """A uvicorn server that takes one connection each time its socket wakes it (asyncio
    accepts up to `backlog` connections a wake-up), with the kernel's queue left as deep as
    `_bind` made it. For several workers on one socket: a worker that has just finished a
    query would otherwise take every connection waiting, and queue them behind each other,
    while another worker sat idle."""
    import uvicorn

    class AcceptingOneAtATime(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            for sock in sockets or ():
                sock.listen(LISTEN_BACKLOG)   # asyncio listened with the accept count, 1

    return AcceptingOneAtATime


def serve(stories: list[str] | None = None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          allow_remote: bool = False, mcp: bool = False, root: str | Path | None = None, workers: int = 1,
          pipelines: list[str] | None = None, allow_hosts: list[str] | tuple[str, ...] = (),
          token_file: str | Path | None = None, deadline: float = DEFAULT_DEADLINE,
          read_timeout: float = DEFAULT_READ_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
          writable: list[str] | tuple[str, ...] = ()) -> int:
    """Serve the named stories (names in fixtures/ or paths to story files; default: every
    story in fixtures/ of `root`, the working folder) under the named `pipelines` (default:
    `default` and the bare baselines) until stopped. Returns the exit code.

    Over HTTP: the address is checked (a non-loopback `host` needs `allow_remote` and a
    `token_file`), bound, the stories loaded and every pipeline warmed on each, and only then
    one line printed on stdout saying where it serves (with a warning on stderr when beyond
    loopback). `workers` processes answer on the one port (see garden/serve/_workers.py),
    each with its own copy of the stories, indexes and model. A request's head and body must
    each arrive within `read_timeout` seconds, its query finish within `deadline` seconds;
    a worker holds at most `max_connections` connections. `writable`: the stories (each
    served, JSON Lines) that `remember` and `forget` may write (garden/serve/_writes.py).
    With ``mcp=True``: MCP over stdio, one process; nothing but the protocol is written to
    stdout."""
    from garden.derived.home import check_environment
    from garden.serve._access import Access, read_token
    from garden.serve._core import Counts, Garden, Shelf, served_pipelines
    from garden.serve._workers import can_fork, run_workers
    from garden.serve._writes import Writing

    def check_request_limits() -> None:
        check_environment()
        _check_limit("workers", workers, 1, MAX_WORKERS, "a whole number of processes")
        _check_limit("deadline", deadline, 0.1, 3600)
        _check_limit("read_timeout", read_timeout, 0.1, 600)
        _check_limit("max_connections", max_connections, 1, 10_000, "a whole number of connections")
        if workers > 1 and (mcp or not can_fork()):
            raise GardenError("`workers`: more than one needs HTTP on a system that can fork; "
                              + ("MCP serves one client over stdio" if mcp else "this one cannot"))
        _require(*(("mcp",) if mcp else ("starlette", "uvicorn", "mcp")))

    if mcp:
        try:
            with _stdout_to_stderr():
                check_request_limits()
                shelf = Shelf.open(stories, Path(root) if root else None)
                garden = Garden(shelf, pipelines=served_pipelines(pipelines), deadline=deadline,
                                writing=Writing.check(writable, shelf.paths) if writable else None)
                garden.warm(warn)
        except GardenError as exc:
            refuse_first_request(exc.messages[0] if exc.messages else str(exc))
            raise
        from garden.serve.mcp import run_stdio

        run_stdio(garden)
        return 0
    check_request_limits()

    check_address(host, port, allow_remote, token_file)
    token = read_token(token_file) if token_file is not None else None
    shelf = Shelf.open(stories, Path(root) if root else None)   # a name that finds nothing: refused before binding
    served_pipelines(pipelines)   # every name checked (and made once) before binding; each worker makes its own
    writing = Writing.check(writable, shelf.paths) if writable else None   # its window shared by the workers
    counts = Counts()
    sock = _bind(host, port)
    access = Access.make(host, sock.getsockname()[1], list(allow_hosts), token)

    def banner() -> None:
        names = shelf.names()
        print(f"garden: serving {len(names)} stor{'y' if len(names) == 1 else 'ies'} ({', '.join(names)}) "
              f"on {_url(sock)}" + (f" with {workers} workers" if workers > 1 else "")
              + (f"; writing to {', '.join(writing.stories)}" if writing else "") + "; ctrl-c stops", flush=True)
        if not is_loopback(host):
            warn(f"serving on {host}, beyond this machine: anyone who can reach {_url(sock)} and holds the token "
                 "can query every story served, private records included when asked")

    def answer(worker: int, ready) -> None:
        garden = Garden(shelf, counts, pipelines=served_pipelines(pipelines), deadline=deadline, writing=writing)
        garden.warm(warn if worker == 0 else None)   # one worker says what does not answer yet, not each
        import uvicorn

        from garden.serve._limits import bounded_protocol
        from garden.serve.http import build_app

        # the standard library's event loop even where uvloop is installed: with two workers
        # and four clients, uvloop put p50 at 36-40 ms against 28-29 ms (experiments/serve_load.py)
        shared = workers > 1
        config = uvicorn.Config(build_app(garden, shared=shared, access=access, read_timeout=read_timeout),
                                log_level="warning", access_log=False, lifespan="on", server_header=False,
                                timeout_graceful_shutdown=10, loop="asyncio",
                                http=bounded_protocol(read_timeout, max_connections),
                                backlog=1 if shared else LISTEN_BACKLOG)
        ready()
        (_accepting_one_at_a_time() if shared else uvicorn.Server)(config).run(sockets=[sock])

    try:
        if workers == 1:
            answer(0, banner)
            return 0
        return run_workers(workers, answer, banner)
    finally:
        sock.close()
