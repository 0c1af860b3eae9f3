"""`garden serve --mcp`: the garden as an MCP server over stdio, driven by the SDK's own client.

The server is started as a subprocess by `mcp.client.stdio.stdio_client`; a `ClientSession`
lists its tools, lists the stories, recalls, and is refused. `recall` must hand back, as
structured content, the packet the HTTP server gives for the same query (and so the packet
`garden query --json` prints); stdout must carry nothing but the protocol.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from test_serve import GAMING, Server, copy_store, store_env

ROOT = Path(__file__).resolve().parents[1]


def server_parameters(store: Path, *args: str) -> StdioServerParameters:
    # the SDK passes the server only a safe few variables of its own; the garden's are added
    env = {k: v for k, v in store_env(store).items() if k.startswith("GARDEN_") or k == "PYTHONPATH"}
    return StdioServerParameters(command=sys.executable, args=["-m", "garden.cli", "serve", "--mcp", *args],
                                 env=env, cwd=str(store))


async def conversation(store: Path, errlog) -> dict:
    """One session with the server: what each call answered, and anything the transport
    could not read as a protocol message."""
    unreadable: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, Exception):
            unreadable.append(repr(message))

    out: dict = {"unreadable": unreadable}
    async with stdio_client(server_parameters(store), errlog=errlog) as (read, write):
        async with ClientSession(read, write, message_handler=on_message, read_timeout_seconds=300) as session:
            out["init"] = await session.initialize()
            out["tools"] = (await session.list_tools()).tools
            out["stories"] = await session.call_tool("list_stories", {})
            out["recall"] = await session.call_tool("recall", {"text": GAMING, "story": "aurora-ridge",
                                                               "as_of": "2030-01-06"})
            out["bm25"] = await session.call_tool("recall", {"text": "What did the studio rent change to?",
                                                             "story": "kiln-lane", "pipeline": "bm25",
                                                             "budget": 300})
            out["unknown_story"] = await session.call_tool("recall", {"text": GAMING, "story": "nowhere"})
            out["bad_date"] = await session.call_tool("recall", {"text": GAMING, "story": "aurora-ridge",
                                                                 "as_of": "2030-02-30"})
            out["no_story"] = await session.call_tool("recall", {"text": GAMING})
            out["bad_type"] = await session.call_tool("recall", {"text": GAMING, "story": "aurora-ridge",
                                                                 "budget": "lots"})
            # a pipeline with options (a path, a host) is the operator's to serve, never a caller's
            out["uri"] = await session.call_tool("recall", {"text": GAMING, "story": "aurora-ridge",
                                                            "pipeline": f"milvus-bm25:uri={store}/planted/x.db"})
            out["after"] = await session.call_tool("list_stories", {})
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return copy_store(tmp_path_factory.mktemp("mcp"))


@pytest.fixture(scope="module")
def session(store, tmp_path_factory) -> dict:
    log = tmp_path_factory.mktemp("mcp-log") / "stderr.txt"
    with open(log, "w", encoding="utf-8") as errlog:
        out = anyio.run(conversation, store, errlog)
    out["stderr"] = log.read_text(encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def http(store):
    served = Server(store)
    yield served
    served.stop()


def test_it_offers_recall_and_list_stories(session):
    tools = {tool.name: tool for tool in session["tools"]}
    assert set(tools) == {"recall", "list_stories"}
    schema = tools["recall"].input_schema
    assert schema["required"] == ["text", "story"]   # several stories served: none is the default
    assert {"text", "story", "budget", "as_of", "pipeline"} == set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert session["init"].server_info.name == "garden"


def test_list_stories_lists_the_fixtures(session, store):
    result = session["stories"]
    assert not result.is_error
    names = [row["name"] for row in result.structured_content["stories"]]
    assert names == sorted(p.stem for p in (store / "fixtures").glob("*.yaml"))
    assert all(row["ok"] for row in result.structured_content["stories"])
    assert "aurora-ridge: 48 records" in result.content[0].text


def test_recall_returns_the_packet_the_http_server_returns(session, http):
    for name, body in (("recall", {"story": "aurora-ridge", "text": GAMING, "as_of": "2030-01-06"}),
                       ("bm25", {"story": "kiln-lane", "text": "What did the studio rent change to?",
                                 "pipeline": "bm25", "budget": 300})):
        result = session[name]
        assert not result.is_error, result.content
        packet = http.post(body).json()
        assert result.structured_content["items"] == packet["items"]
        assert result.structured_content == packet
    first = session["recall"]
    assert first.structured_content["items"][0]["id"] == "state.mira.gaming"
    text = first.content[0].text
    assert text.startswith("outcome: answered\ndecision: retrieve") and "1. state.mira.gaming (state" in text


def test_a_caller_cannot_name_a_path_through_the_pipeline(session, store):
    result = session["uri"]
    assert result.is_error and result.structured_content["field"] == "pipeline"
    assert "not served here" in result.structured_content["error"]
    assert not (store / "planted").exists()


def test_refusals_are_tool_errors_and_the_server_carries_on(session):
    for name, field in (("unknown_story", "story"), ("bad_date", "as_of"), ("no_story", "story"),
                        ("bad_type", "budget")):
        result = session[name]
        assert result.is_error, name
        assert result.structured_content["field"] == field
        assert result.content[0].text.startswith(f"refused: {field}: ") and "\n" not in result.content[0].text
    assert not session["after"].is_error


def test_stdout_carries_nothing_but_the_protocol(session):
    assert session["unreadable"] == []
    assert "Traceback" not in session["stderr"]


def test_every_stdout_line_is_a_json_rpc_message(store):
    """The wire read raw: initialize, one recall, then stdin closed; every line on stdout is
    one JSON-RPC message, and the process ends by itself."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "recall", "arguments": {"text": GAMING, "story": "aurora-ridge"}}},
    ]
    env = store_env(store)
    proc = subprocess.Popen([sys.executable, "-m", "garden.cli", "serve", "--mcp", "aurora-ridge"], cwd=store,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watchdog = threading.Timer(300, proc.kill)   # a hung server fails the test, never the run
    watchdog.start()
    lines: list[bytes] = []
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages[:2]))
        proc.stdin.flush()
        lines.append(proc.stdout.readline())   # the call goes once the server has answered initialize
        proc.stdin.write(json.dumps(messages[2]).encode() + b"\n")
        proc.stdin.flush()
        while (line := proc.stdout.readline()) and '"id":2' not in line.decode().replace(" ", ""):
            lines.append(line)
        lines.append(line)
        rest, stderr = proc.communicate(timeout=60)   # stdin closed: the server ends by itself
        lines += rest.splitlines(keepends=True)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    replies = [json.loads(line) for line in lines if line.strip()]
    assert all(r.get("jsonrpc") == "2.0" for r in replies)
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert by_id[1]["result"]["serverInfo"]["name"] == "garden"
    assert by_id[2]["result"]["structuredContent"]["items"][0]["id"] == "state.mira.gaming"
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert b"Traceback" not in stderr
