"""A live memory agents write to, through every door: `garden serve --writable` driven over
HTTP, and by the official MCP SDK's client over stdio and over Streamable HTTP (`/mcp`).

Through each door the walk-through of tests/written_memory.py is made on a story of its own
(a copy of the quarry hut's base, under the door's name): each record remembered is found
by the next query, a superseded decision rides right behind the one that replaced it, a
forgotten note leaves every packet and the control record names it; the story each door
wrote is byte for byte the contrast case's. A story not writable, an unknown topic, a
path-shaped or oversized field: each refused naming its field, nothing written. Then
twenty clients write 500 records through two workers, and a server is killed while
clients write: the story reads back valid, every answered write in it.
"""
from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from garden.formats.stories import load_story
import written_memory
from test_serve import Server, store_env

ROOT = Path(__file__).resolve().parents[1]
AS_OF = "2031-12-10"
HEATED = "How is the hut heated now?"
CISTERN = "Is there water in the cistern?"
TIMEOUT = 300
DOORS = {"http": "hut-http", "mcp-http": "hut-mcp", "stdio": "hut-stdio"}   # door -> the story it writes


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("writes")
    (root / "fixtures").mkdir()
    for story in [*DOORS.values(), "hut-load"]:
        written_memory.base_copy(root / "fixtures", story)
    (root / "fixtures" / "kiln-lane.yaml").write_bytes((ROOT / "fixtures" / "kiln-lane.yaml").read_bytes())
    return root


@pytest.fixture(scope="module")
def server(store):
    writable = [arg for story in [*DOORS.values(), "hut-load"] if story != "hut-stdio"
                for arg in ("--writable", story)]
    served = Server(store, "--pipelines", "default,bm25", "--workers", "2", *writable)
    yield served
    served.stop()


def today() -> str:
    return dt.date.today().isoformat()


def story_path(store: Path, story: str) -> Path:
    return store / "fixtures" / f"{story}.jsonl"


def packet_ids(packet: dict) -> list[str]:
    return [item["id"] for item in packet["items"]]


# --- each door ----------------------------------------------------------------------------


def walk_checking_reads(call, recall, story: str) -> dict:
    """The walk-through through one door, `recall(text, **arguments)` asked after each write:
    what the reads saw, by step."""
    seen: dict = {}

    def checked(tool: str, arguments: dict) -> dict:
        answer = call(tool, arguments)
        if tool == "remember" and not arguments.get("private"):
            # the next query after an answered write sees it, whichever worker answers
            seen[answer["id"]] = packet_ids(recall(arguments["text"], story=story, as_of=AS_OF, budget=4000))
        return answer

    seen["answered"] = written_memory.walk(checked, story)
    seen["heated"] = recall(HEATED, story=story, as_of=AS_OF)
    seen["cistern"] = recall(CISTERN, story=story, as_of=AS_OF)
    seen["gate code"] = recall("What is the code of the quarry gate's padlock?", story=story, as_of=AS_OF)
    return seen


def check_the_walk(seen: dict, path: Path) -> None:
    answered = seen["answered"]
    for rid in answered[:5]:
        assert rid in seen[rid], f"{rid} written, then not found by the next query: {seen[rid]}"
    heated = seen["heated"]
    assert packet_ids(heated)[:2] == ["decision.000004", "decision.000001"], packet_ids(heated)
    behind = heated["items"][1]
    assert "conflicting_or_superseded" in behind["labels"] and behind["superseded_by"] == "decision.000004"
    cistern = seen["cistern"]   # a superseded state is never served: the one that replaced it leads
    assert packet_ids(cistern)[0] == "state.000005" and "state.000002" not in packet_ids(cistern)
    assert {"id": "state.000002", "reason": "superseded_state"}.items() <= next(
        r for r in cistern["rejected"] if r["id"] == "state.000002").items()
    assert "note.000006" not in packet_ids(seen["gate code"]) and "control.000007" not in packet_ids(seen["gate code"])
    story = load_story(path)
    assert "note.000006" not in story.by_id and "note.000006" in story.by_id["control.000007"].text
    assert written_memory.same_story(path, today())


def test_over_http_reads_see_writes_and_supersession_leads_with_the_new(server, store):
    def call(tool: str, arguments: dict) -> dict:
        response = server.client.post(f"/{tool}", json=arguments)
        assert response.status_code == 200, response.text
        return response.json()

    def recall(text: str, **arguments) -> dict:
        response = server.post({"text": text, **arguments})
        assert response.status_code == 200, response.text
        return response.json()

    check_the_walk(walk_checking_reads(call, recall, DOORS["http"]), story_path(store, DOORS["http"]))
    log = store / ".garden" / "traces" / f"writes-{today()}.jsonl"
    logged = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert ("forget", DOORS["http"], "note.000006") in [(e["tool"], e["story"], e["id"]) for e in logged]


# each refusal the issue names, and the field it names
REFUSED = [
    ({"story": "kiln-lane", "text": "The kiln is cold."}, 403, "story"),
    ({"text": "The boiler hums.", "topics": ["plumbing"]}, 422, "topics"),
    ({"text": "The boiler hums.", "story": "../fixtures/hut-http"}, 404, "story"),
    ({"text": "The boiler hums.", "kind": "state", "supersedes": "../../etc/passwd"}, 422, "supersedes"),
    ({"text": "x" * 8001}, 422, "text"),
    ({"text": "The boiler hums.", "id": "source.999999"}, 422, "id"),
]


def _with_story(body: dict, story: str) -> dict:
    return {"story": story, **body}


def test_over_http_every_refusal_names_its_field_and_writes_nothing(server, store):
    path = story_path(store, "hut-load")
    before = path.read_bytes()
    for body, status, field in REFUSED:
        response = server.client.post("/remember", json=_with_story(body, "hut-load"))
        assert (response.status_code, response.json()["field"]) == (status, field), response.text
    response = server.client.post("/forget", json={"story": "hut-load", "id": "../log.0901"})
    assert (response.status_code, response.json()["field"]) == (422, "id")
    response = server.client.post("/remember", content=b'{"story": "hut-load", "text": "x"}',
                                  headers={"content-type": "text/plain"})
    assert (response.status_code, response.json()["field"]) == (415, "Content-Type")
    assert path.read_bytes() == before and server.alive()


def test_the_interface_describes_the_writes(server):
    paths = server.client.get("/openapi.json").json()["paths"]
    assert paths["/remember"]["post"]["operationId"] == "remember"
    assert paths["/forget"]["post"]["operationId"] == "forget"
    rows = {row["name"]: row for row in server.client.get("/stories").json()["stories"]}
    assert rows["hut-http"]["writable"] is True and rows["kiln-lane"]["writable"] is False
    assert "writing to hut-http" in server.banner


async def _over_mcp(session: ClientSession, story: str) -> dict:
    assert "Call remember" in (await session.initialize()).instructions
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    async def call(tool: str, arguments: dict) -> dict:
        result = await session.call_tool(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    async def recall(text: str, **arguments) -> dict:
        return await call("recall", {"text": text, **arguments})

    refusals = [await session.call_tool("remember", _with_story(body, story)) for body, _, _ in REFUSED]
    # the walk-through's calls, made one after another from this task
    seen: dict = {}
    answered: list[str] = []
    for tool, step in written_memory.STEPS:
        arguments = written_memory.arguments(step, answered, story)
        answer = await call(tool, arguments)
        answered.append(answer["control"] if tool == "forget" else answer["id"])
        if tool == "remember" and not arguments.get("private"):
            seen[answer["id"]] = packet_ids(await recall(arguments["text"], story=story, as_of=AS_OF, budget=4000))
    seen["answered"] = answered
    seen["heated"] = await recall(HEATED, story=story, as_of=AS_OF)
    seen["cistern"] = await recall(CISTERN, story=story, as_of=AS_OF)
    seen["gate code"] = await recall("What is the code of the quarry gate's padlock?", story=story, as_of=AS_OF)
    return {"tools": tools, "refusals": refusals, "seen": seen}


async def _stdio(folder: Path, errlog) -> dict:
    env = {k: v for k, v in store_env(folder).items() if k.startswith("GARDEN_") or k == "PYTHONPATH"}
    parameters = StdioServerParameters(command=sys.executable, cwd=str(folder), env=env, args=[
        "-m", "garden.cli", "serve", "--mcp", "--pipelines", "default", "--writable", DOORS["stdio"],
        "--writable", "hut-load"])
    async with stdio_client(parameters, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            return await _over_mcp(session, DOORS["stdio"])


async def _streamable(url: str) -> dict:
    import httpx2

    client = httpx2.AsyncClient(timeout=TIMEOUT)
    async with client, streamable_http_client(f"{url}/mcp", http_client=client) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            return await _over_mcp(session, DOORS["mcp-http"])


@pytest.mark.parametrize("door", ["stdio", "mcp-http"])
def test_through_the_mcp_sdk_an_agent_remembers_supersedes_and_forgets(door, server, store):
    before = story_path(store, "hut-load").read_bytes()
    if door == "stdio":
        with open(store / f"stderr-{door}.txt", "w", encoding="utf-8") as errlog:
            out = anyio.run(_stdio, store, errlog)
        assert "Traceback" not in (store / f"stderr-{door}.txt").read_text(encoding="utf-8")
    else:
        out = anyio.run(_streamable, server.url)
    tools = out["tools"]
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False and tools["remember"].annotations.destructive_hint \
        is False
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].input_schema["additionalProperties"] is False
    for result, (_, _, field) in zip(out["refusals"], REFUSED):
        assert result.is_error and result.structured_content["field"] == field, result.content
        assert result.content[0].text.startswith(f"refused: {field}")
    assert story_path(store, "hut-load").read_bytes() == before
    check_the_walk(out["seen"], story_path(store, DOORS[door]))


# --- many writers, and a server killed among them ------------------------------------------


def _write_many(url: str, story: str, count: int, clients: int, answered: list, stop=None) -> list[str]:
    """`count` remembers from `clients` threads, each its own client; each id answered
    appended to `answered` as it comes; the failures (None when stopped)."""
    lock = threading.Lock()
    failures: list[str] = []
    clients_made: list[httpx.Client] = []
    mine = threading.local()   # a client per thread: making one costs more than a write

    def one(n: int) -> None:
        if stop is not None and stop.is_set():
            return
        client = getattr(mine, "client", None)
        if client is None:
            client = mine.client = httpx.Client(base_url=url, timeout=60)
            clients_made.append(client)
        try:
            response = client.post("/remember", json={"story": story, "text": f"Load line {n}: a cairn rebuilt.",
                                                      "topics": ["routes"], "at": "2031-12-05"})
        except httpx.HTTPError as exc:
            if stop is None or not stop.is_set():
                failures.append(f"{n}: {exc}")
            return
        if response.status_code == 200:
            with lock:
                answered.append((n, response.json()["id"]))
        else:
            failures.append(f"{n}: {response.status_code} {response.text}")

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(count)))
    for client in clients_made:
        client.close()
    return failures


def test_twenty_clients_and_two_workers_write_500_records_each_once(server, store):
    answered: list = []
    started = time.monotonic()
    failures = _write_many(server.url, "hut-load", 500, 20, answered)
    took = time.monotonic() - started
    assert failures == [] and len(answered) == 500
    story = load_story(story_path(store, "hut-load"))
    loaded = [r for r in story.records if r.text and r.text.startswith("Load line ")]
    assert sorted(r.text for r in loaded) == sorted(f"Load line {n}: a cairn rebuilt." for n in range(500))
    assert sorted(r.id for r in loaded) == sorted(rid for _, rid in answered)
    assert all(line.endswith("}") for line in story_path(store, "hut-load").read_text().splitlines())
    assert took < 60, f"500 writes took {took:.1f} s"


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc")
def test_a_server_killed_among_writers_leaves_every_answered_write(tmp_path):
    (tmp_path / "fixtures").mkdir()
    path = written_memory.base_copy(tmp_path / "fixtures", "hut-kill")
    served = Server(tmp_path, "--pipelines", "bm25", "--workers", "2", "--writable", "hut-kill")
    answered: list = []
    stop = threading.Event()
    writers = threading.Thread(target=_write_many, args=(served.url, "hut-kill", 2000, 10, answered, stop))
    try:
        writers.start()
        deadline = time.monotonic() + 30
        while len(answered) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in [*_children(served.proc.pid), served.proc.pid]:   # every worker, then the parent: at once
            os.kill(pid, signal.SIGKILL)
        stop.set()
    finally:
        writers.join(60)
        served.stop()
    assert len(answered) >= 40
    story = load_story(path)   # valid by every rule, a torn last line set aside
    held = {r.id for r in story.records}
    assert {rid for _, rid in answered} <= held
    again = Server(tmp_path, "--pipelines", "bm25", "--writable", "hut-kill")   # and it takes writes again
    try:
        response = again.client.post("/remember", json={"story": "hut-kill", "text": "Back after the fall."})
        assert response.status_code == 200, response.text
    finally:
        again.stop()
    assert {*held, response.json()["id"]} <= {r.id for r in load_story(path).records}


def test_a_write_carries_the_token_a_query_carries(tmp_path):
    import secrets

    (tmp_path / "fixtures").mkdir()
    path = written_memory.base_copy(tmp_path / "fixtures", "hut-token")
    token = secrets.token_urlsafe(32)
    (tmp_path / "token").write_text(token + "\n", encoding="utf-8")
    (tmp_path / "token").chmod(0o600)
    served = Server(tmp_path, "--pipelines", "bm25", "--writable", "hut-token", "--token-file", str(tmp_path / "token"),
                    headers={"authorization": f"Bearer {token}"})
    try:
        before = path.read_bytes()
        body = {"story": "hut-token", "text": "Snow closed the quarry road."}
        for headers in ({"authorization": "Bearer wrong-token-of-enough-length"}, {"authorization": ""}):
            refused = httpx.post(f"{served.url}/remember", json=body, headers=headers)
            assert (refused.status_code, refused.json()["field"]) == (401, "Authorization")
        assert httpx.post(f"{served.url}/forget", json={"story": "hut-token", "id": "log.0901"}).status_code == 401
        assert path.read_bytes() == before
        assert served.client.post("/remember", json=body).status_code == 200
    finally:
        served.stop()
