"""Agents meet the garden as their protocols expect: the official MCP SDK's client over stdio
and over Streamable HTTP (`/mcp` on the server `garden serve` starts), and the wire read raw.

One small fictional story (kiln-lane) is served under two pipelines. Over both transports the
client lists the tools (their input schema the one `POST /query` is described by, the packet
their output schema), recalls, is refused with the field named for each argument the issue
listed, gets a JSON-RPC error for a tool that does not exist, and reads the silent outcome,
with its reason, for a question the store cannot answer. A server started where there is no
story says why in the first message its client gets.
"""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from garden.serve._core import FIELDS, RequestError, parse_request, request_schema
from test_serve import Server, store_env

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = "default,bm25"
RENT = "What did the studio rent change to?"
FRANCE = "What is the capital of France?"
TIMEOUT = 300   # seconds for one conversation: a cold machine loads the model once
# each argument an agent was once served with, and the field its refusal names
REFUSED = [
    ({"text": RENT, "budget": True}, "budget"),
    ({"text": RENT, "budget": 2.7}, "budget"),
    ({"text": RENT, "budget": "lots"}, "budget"),
    ({"text": RENT, "budget": 0}, "budget"),
    ({"budget": 300}, "text"),
    ({"text": "x" * 2001}, "text"),
    ({"text": RENT, "when": "today"}, "when"),
    ({"text": RENT, "include_private": True}, "include_private"),
    ({"text": RENT, "session": ["earlier"]}, "session"),
    ({"text": RENT, "hints": {"topics": ["rent"]}}, "hints"),
    ({"text": RENT, "pipeline": "dense"}, "pipeline"),
    ({"text": RENT, "as_of": "2030-02-30"}, "as_of"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("agents")
    (root / "fixtures").mkdir()
    shutil.copy(ROOT / "fixtures" / "kiln-lane.yaml", root / "fixtures")
    return root


@pytest.fixture(scope="module")
def token(store) -> str:
    value = secrets.token_urlsafe(32)
    path = store / "token"
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)
    return value


@pytest.fixture(scope="module")
def http(store, token):
    served = Server(store, "--pipelines", PIPELINES, "--token-file", str(store / "token"),
                    headers={"authorization": f"Bearer {token}"})
    yield served
    served.stop()


def stdio_parameters(folder: Path) -> StdioServerParameters:
    # the SDK passes the server only a safe few variables of its own; the garden's are added
    env = {k: v for k, v in store_env(folder).items() if k.startswith("GARDEN_") or k == "PYTHONPATH"}
    return StdioServerParameters(command=sys.executable, cwd=str(folder), env=env,
                                 args=["-m", "garden.cli", "serve", "--mcp", "--pipelines", PIPELINES])


async def converse(session: ClientSession) -> dict:
    """What each call answered, over whichever transport the session runs on."""
    out: dict = {"init": await session.initialize(), "tools": (await session.list_tools()).tools}
    out["stories"] = await session.call_tool("list_stories", {})
    out["rent"] = await session.call_tool("recall", {"text": RENT, "pipeline": "bm25", "budget": 300})
    out["whole"] = await session.call_tool("recall", {"text": RENT, "pipeline": "bm25", "budget": 300.0})
    out["nulls"] = await session.call_tool("recall", {"text": RENT, "pipeline": "bm25", "budget": 300,
                                                      "story": None, "as_of": None})
    out["france"] = await session.call_tool("recall", {"text": FRANCE})
    out["refused"] = [await session.call_tool("recall", arguments) for arguments, _ in REFUSED]
    out["stories_refused"] = await session.call_tool("list_stories", {"story": "kiln-lane"})
    try:
        await session.call_tool("forget", {"text": RENT})
    except MCPError as exc:
        out["unknown_tool"] = exc
    return out


async def over_stdio(folder: Path, errlog) -> dict:
    async with stdio_client(stdio_parameters(folder), errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            return await converse(session)


async def over_http(url: str, token: str) -> dict:
    client = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    async with client, streamable_http_client(f"{url}/mcp", http_client=client) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            return await converse(session)


@pytest.fixture(scope="module")
def sessions(store, http, token, tmp_path_factory) -> dict:
    log = tmp_path_factory.mktemp("agents-log") / "stderr.txt"
    with open(log, "w", encoding="utf-8") as errlog:
        stdio = anyio.run(over_stdio, store, errlog)
    assert "Traceback" not in log.read_text(encoding="utf-8")
    return {"stdio": stdio, "http": anyio.run(over_http, http.url, token)}


TRANSPORTS = ["stdio", "http"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_server_says_who_it_is_and_offers_only_tools(sessions, transport):
    init = sessions[transport]["init"]
    assert init.server_info.name == "garden"
    assert init.server_info.version and init.server_info.version[0].isdigit()
    capabilities = init.capabilities
    assert capabilities.tools is not None
    assert capabilities.prompts is None and capabilities.resources is None and capabilities.logging is None
    assert "outcome" in init.instructions and "silent" in init.instructions and "abstain" not in init.instructions


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recall_takes_the_arguments_post_query_takes(sessions, transport):
    tools = {tool.name: tool for tool in sessions[transport]["tools"]}
    assert set(tools) == {"recall", "list_stories"}
    schema = tools["recall"].input_schema
    assert schema == request_schema(("text", "story", "budget", "as_of", "pipeline"), ["kiln-lane"],
                                    PIPELINES.split(","))
    assert schema["additionalProperties"] is False and schema["required"] == ["text"]
    assert schema["properties"]["text"]["maxLength"] == 2000
    assert schema["properties"]["budget"]["maximum"] == 1_000_000
    assert schema["properties"]["pipeline"]["enum"] == ["default", "bm25", None]
    assert tools["list_stories"].input_schema["additionalProperties"] is False


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_recall_returns_the_packet_post_query_returns_within_its_output_schema(sessions, transport, http):
    tools = {tool.name: tool for tool in sessions[transport]["tools"]}
    result = sessions[transport]["rent"]
    assert not result.is_error, result.content
    packet = result.structured_content
    assert packet == http.post({"text": RENT, "pipeline": "bm25", "budget": 300}).json()
    assert packet["outcome"] == "answered" and packet["silent"] is None and packet["items"]
    Draft202012Validator(tools["recall"].output_schema).validate(packet)
    assert result.content[0].text.startswith("outcome: answered\ndecision: retrieve")
    # null is leaving a field out, and 300.0 is 300: the same packet
    assert sessions[transport]["whole"].structured_content == packet
    assert sessions[transport]["nulls"].structured_content == packet
    stories = sessions[transport]["stories"]
    Draft202012Validator(tools["list_stories"].output_schema).validate(stories.structured_content)
    assert [row["name"] for row in stories.structured_content["stories"]] == ["kiln-lane"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_question_the_store_cannot_answer_comes_back_silent_with_its_reason(sessions, transport):
    result = sessions[transport]["france"]
    assert not result.is_error
    packet = result.structured_content
    assert packet["outcome"] == "silent" and packet["items"] == []
    assert packet["silent"].startswith("No record matched the query") and packet["silent"].endswith(".")
    assert result.content[0].text.startswith(f"outcome: silent: {packet['silent']}\n")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_refused_argument_is_a_tool_error_naming_its_field(sessions, transport):
    for (arguments, field), result in zip(REFUSED, sessions[transport]["refused"]):
        assert result.is_error, arguments
        assert set(result.structured_content) == {"error", "field"}
        assert result.structured_content["field"] == field, (arguments, result.structured_content)
        text = result.content[0].text
        assert text.startswith(f"refused: {field}: ") and "\n" not in text, text
        assert "pydantic" not in text
    refused = sessions[transport]["stories_refused"]
    assert refused.is_error and refused.structured_content["field"] == "story"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_unknown_tool_is_a_json_rpc_error(sessions, transport):
    error = sessions[transport]["unknown_tool"]
    assert error.error.code == -32602 and "forget" in error.error.message


# --- the wire, read raw ---------------------------------------------------------------------

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "0"}}}
# a number no double holds: the SDK's client cannot send it, a raw one can
HUGE = (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", '
        b'"arguments": {"text": "rent", "pipeline": "bm25", "budget": 1e400}}}')


def test_on_stdio_a_line_that_is_not_json_gets_a_parse_error_and_the_server_carries_on(store):
    lines = [json.dumps(INITIALIZE).encode(), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
             .encode(), b"{not json", HUGE]
    proc = subprocess.Popen([sys.executable, "-m", "garden.cli", "serve", "--mcp", "--pipelines", "bm25"],
                            cwd=store, env=store_env(store), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    replies = []
    try:
        for line in lines:
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()
            if b'"id"' in line or not line.startswith(b"{\""):   # a request, or a line that is none
                replies.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert replies[0]["result"]["serverInfo"]["name"] == "garden"
    assert replies[1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": replies[1]["error"]
                                                                    ["message"]}}
    assert replies[2]["id"] == 2 and replies[2]["result"]["isError"] is True
    assert replies[2]["result"]["structuredContent"]["field"] == "budget"
    assert proc.returncode == 0


def test_over_http_mcp_is_under_the_access_rule_and_the_limits(http, token):
    url = f"{http.url}/mcp"
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    bare = httpx.post(url, content=json.dumps(INITIALIZE), headers=accept, timeout=60)
    assert bare.status_code == 401 and bare.json()["field"] == "Authorization"
    signed = {**accept, "authorization": f"Bearer {token}"}
    foreign = httpx.post(url, content=json.dumps(INITIALIZE), headers={**signed, "origin": "http://example.org"},
                         timeout=60)
    assert foreign.status_code == 403 and foreign.json()["field"] == "Origin"
    big = httpx.post(url, content=b" " * 70_000 + json.dumps(INITIALIZE).encode(), headers=signed, timeout=60)
    assert big.status_code == 413 and big.json()["field"] == "body"
    huge = httpx.post(url, content=HUGE, headers={**signed, "mcp-protocol-version": "2025-06-18"}, timeout=TIMEOUT)
    assert huge.status_code == 200, huge.text
    assert huge.json()["result"]["structuredContent"]["field"] == "budget"
    assert http.alive()


def test_a_server_that_cannot_start_says_why_to_its_client(tmp_path):
    async def start() -> str:
        with open(tmp_path / "stderr.txt", "w", encoding="utf-8") as errlog:
            async with stdio_client(stdio_parameters(tmp_path), errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as session:
                    with pytest.raises(MCPError) as refused:
                        await session.initialize()
                    return refused.value.error.message

    message = anyio.run(start)
    assert message.startswith("garden serve cannot start: no stories to serve: ")
    assert "holds no story file" in message


# --- one contract: what the schema admits is what the server takes --------------------------

BODIES = [
    {"text": RENT}, {"text": RENT, "budget": None}, {"text": RENT, "budget": 2.0}, {"text": RENT, "budget": 2},
    {"text": RENT, "budget": 2.5}, {"text": RENT, "budget": True}, {"text": RENT, "budget": "2"},
    {"text": RENT, "budget": 0}, {"text": RENT, "budget": 1_000_001}, {"text": RENT, "story": None},
    {"text": RENT, "story": "kiln-lane"}, {"text": RENT, "story": "elsewhere"}, {"text": RENT, "pipeline": None},
    {"text": RENT, "pipeline": "dense"}, {"text": RENT, "as_of": None}, {"text": RENT, "as_of": "2030-01-06"},
    {"text": RENT, "as_of": "20300106"}, {"text": RENT, "as_of": 20300106}, {"text": RENT, "include_private": None},
    {"text": RENT, "include_private": "yes"}, {"text": RENT, "session": None}, {"text": RENT, "session": [1]},
    {"text": RENT, "session": ["q"] * 17}, {"text": RENT, "hints": {"topics": ["rent"] * 33}},
    {"text": RENT, "hints": None}, {"text": RENT, "settings": None}, {"text": RENT, "settings": [1]},
    {"text": "x" * 2001}, {"text": None}, {"text": 7}, {}, {"text": RENT, "when": "today"},
]


@pytest.mark.parametrize("body", BODIES, ids=[json.dumps(b)[:60] for b in BODIES])
def test_the_schema_and_the_check_agree(body):
    schema = request_schema(FIELDS, ["kiln-lane"], ["default", "bm25"])
    admitted = Draft202012Validator(schema).is_valid(body)
    try:
        parse_request(body, ["kiln-lane"], ["default", "bm25"])
        taken = True
    except RequestError:
        taken = False
    assert admitted == taken
