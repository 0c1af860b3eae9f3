"""The garden as an MCP server, with the official SDK's low-level server (`mcp`): over
stdio (`garden serve --mcp`), and over Streamable HTTP at `/mcp` beside the HTTP API.

The tools:

- ``recall(text, story=None, budget=1200, as_of=None, pipeline="default")``: one query; the
  packet (exactly what `garden query --json` prints, `outputSchema` its schema) as structured
  content, and a short rendering of it as text for a model to read. Written to the trace
  like any query.
- ``list_stories()``: the stories served, as `GET /stories` lists them.
- ``remember(story, text, kind, at, topics, entities, private, supersedes)`` and
  ``forget(story, id)``, listed only on a server whose operator made a story writable
  (`garden.serve._writes`): the answers of `POST /remember` and `POST /forget`, by one
  schema for both doors. Their annotations say what they do: `recall` and `list_stories`
  read only, `remember` writes, `forget` destroys.

One argument contract for both doors: `recall`'s input schema is `request_schema` of its
fields, the schema `POST /query` is described by, and its arguments are checked by the
same `parse_request`, so an unknown argument, a wrong type, a bound or a length is refused
as HTTP refuses it. A refused call is a tool error (``isError``) whose text is ``refused:
FIELD: ...`` and whose structured content is ``{"error", "field"}``. What is not a call of
a tool is a JSON-RPC error: an unknown tool (-32602), a line on stdin that is not JSON
(-32700). The server advertises tools and nothing else, and its version is the garden's.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from garden.serve._core import Garden, RequestError, packet_schema, request_schema
from garden.serve._writes import (FORGET_FIELDS, FORGOTTEN_SCHEMA, REMEMBER_FIELDS, REMEMBERED_SCHEMA, forget,
                                  remember, write_schema)
from garden.text import one_line

INSTRUCTIONS = ("Recall what a person's stored memories say about a question. Call recall with the question as "
                "text. The packet's outcome says what it does: answered (items, each with its labels, such as "
                "current or superseded, and why it was chosen), asked (decision is ask: the question could mean "
                "more than one thing; ask the user which, as the reason says) or silent (no items: nothing stored "
                "answers it, or the question needs no memory; silent says why). Do not answer from memory when "
                "the outcome is silent.")
WRITING = (" Call remember to keep what you learn in a writable story (list_stories says which), with supersedes "
           "naming the state or decision it replaces, and forget to take out what should not be kept.")
TEXT_ITEM_LIMIT = 240   # characters of one item's text in the readable rendering (the packet holds it whole)
SITTINGS_RENDERED = 3   # sittings named in the readable rendering (the packet lists up to ten)
RECALL_FIELDS = ("text", "story", "budget", "as_of", "pipeline")   # of a query's fields, those an agent sets
RECALL = """Ask the stored memories a question. Returns the packet: outcome (answered, asked or silent), \
silent (why nothing is served, when silent), decision (retrieve, ask or skip: what the pipeline decided) and \
reason, items (id, kind, labels, why, text, at) within `budget` characters, the gate (the query's support \
against the store's threshold), and the best sittings the items were found in. `story` names the store to ask \
(see list_stories; optional when one is served); `as_of` is the date to answer as of (YYYY-MM-DD; default: the \
latest the story mentions). An argument the tool does not take, or out of its bounds, is refused: a tool error \
whose text is `refused: FIELD: ...` and whose structured content is {"error", "field"}."""
LIST_STORIES = ("The stories this server answers for: name, file, story id, number of records, and whether the "
                "story builds (a broken edit says why).")
REMEMBER = """Write one record to a story the server's operator made writable; answers its id once it is on \
disk, and the next recall sees it. `text` is what to remember; `kind` is source (what was said or seen, the \
default), note, state (how something is now) or decision; `at` is when (YYYY-MM-DD; default: the server's \
today); `topics` and `entities` are canonical ids of the story; `private` keeps it out of packets that do not \
allow private records. `supersedes` names an earlier state or decision of the same kind that this one replaces: \
it is marked superseded by the new record in the same write, and recall then serves the new one first. A field \
the story refuses (an unknown topic, say) is refused as recall refuses one, and nothing is written."""
FORGET = """Take one record (`id`) out of a writable story: it leaves every packet from then on, and a control \
record in the story says what was forgotten and when. A record another one names (its successor's predecessor, \
a source) is refused until that one is forgotten."""
NO_ARGUMENTS = {"type": "object", "additionalProperties": False, "properties": {}}
STORIES_SCHEMA = {"type": "object", "required": ["stories"], "properties": {"stories": {"type": "array", "items": {
    "type": "object", "required": ["name", "path", "ok"],
    "properties": {"name": {"type": "string"}, "path": {"type": "string"}, "ok": {"type": "boolean"},
                   "story": {"type": "string"}, "records": {"type": "integer"}, "error": {"type": "string"},
                   "writable": {"type": "boolean"}}}}}}


def version() -> str:
    """The garden's version, as installed ("" when it runs from a folder never installed)."""
    try:
        return metadata.version("pinecone-garden")
    except metadata.PackageNotFoundError:
        return ""


def render(packet: dict) -> str:
    """A packet as a few lines a model reads: its outcome (and why, when silent), the decision
    and reason, then one line per item."""
    lines = [f"outcome: {packet['outcome']}" + (f": {packet['silent']}" if packet.get("silent") else ""),
             f"decision: {packet['decision']} ({packet['reason']})"]
    lines += [f"warning: {w}" for w in packet.get("warnings", [])]
    for n, item in enumerate(packet.get("items", []), start=1):
        when = f" {item['at']}" if item.get("at") else ""
        labels = f" [{', '.join(item['labels'])}]" if item.get("labels") else ""
        lines.append(f"{n}. {item['id']} ({item['kind']}{when}){labels}: {one_line(item['text'], TEXT_ITEM_LIMIT)}")
    if not packet.get("items"):
        lines.append("no items")
    sittings = packet.get("sittings", [])[:SITTINGS_RENDERED]
    if sittings:
        lines.append("best sittings: " + "; ".join(
            f"{s['rank']}. {one_line(s.get('title') or 'untitled', 80)}{' ' + str(s['at']) if s.get('at') else ''} "
            f"({', '.join(s['carried_by'])})" for s in sittings))
    budget = packet.get("budget", {})
    rejected = len(packet.get("rejected", []))
    lines.append(f"budget: {budget.get('used')} of {budget.get('limit')} characters; {rejected} "
                 f"candidate{'s' * (rejected != 1)} rejected (see the structured packet)")
    return "\n".join(lines)


def refused(exc: RequestError) -> types.CallToolResult:
    """A refused call: the documented line, `refused: FIELD: ...`, and `{"error", "field"}`."""
    where = f"{exc.field}: " if exc.field and not exc.message.startswith(f"{exc.field}:") else ""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"refused: {where}{exc.message}")],
                                structured_content=exc.to_json(), is_error=True)


def tools(garden: Garden) -> list[types.Tool]:
    """The tools, their arguments described by the schema the HTTP API's are; `remember` and
    `forget` only when the operator made a story writable."""
    read_only = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    listed = [types.Tool(name="recall", title="Recall from the garden", description=RECALL,
                         input_schema=request_schema(RECALL_FIELDS, garden.shelf.names(), list(garden.served)),
                         output_schema=packet_schema(), annotations=read_only),
              types.Tool(name="list_stories", title="List the stories served", description=LIST_STORIES,
                         input_schema=NO_ARGUMENTS, output_schema=STORIES_SCHEMA, annotations=read_only)]
    if garden.writing is not None and garden.writing.stories:
        writable = garden.writing.stories
        listed += [types.Tool(name="remember", title="Remember in the garden", description=REMEMBER,
                              input_schema=write_schema(REMEMBER_FIELDS, writable), output_schema=REMEMBERED_SCHEMA,
                              annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                                idempotent_hint=False, open_world_hint=False)),
                   types.Tool(name="forget", title="Forget a record", description=FORGET,
                              input_schema=write_schema(FORGET_FIELDS, writable), output_schema=FORGOTTEN_SCHEMA,
                              annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                                                idempotent_hint=False, open_world_hint=False))]
    return listed


def _recall(garden: Garden, arguments: dict[str, Any]) -> types.CallToolResult:
    packet = garden.query(arguments, RECALL_FIELDS)   # the garden's lock serializes the queries
    return types.CallToolResult(content=[types.TextContent(type="text", text=render(packet))],
                                structured_content=packet)


def _list_stories(garden: Garden, arguments: dict[str, Any]) -> types.CallToolResult:
    if arguments:
        name = next(iter(arguments))
        raise RequestError(422, f"unknown field {one_line(repr(name), 80)}; list_stories takes none",
                           one_line(name, 80))
    rows = garden.stories()
    text = "\n".join(f"{r['name']}: {r['records']} records ({r['path']})" if r["ok"]
                     else f"{r['name']}: does not build: {r['error']}" for r in rows)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content={"stories": rows})


def _remember(garden: Garden, arguments: dict[str, Any]) -> types.CallToolResult:
    answer = remember(garden, arguments)
    text = f"remembered {answer['id']} in {answer['story']} ({answer['kind']}, {answer['at']})" + (
        f"; {answer['supersedes']} is now superseded by it" if answer["supersedes"] else "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=answer)


def _forget(garden: Garden, arguments: dict[str, Any]) -> types.CallToolResult:
    answer = forget(garden, arguments)
    text = (f"forgot {answer['id']} in {answer['story']} on {answer['forgotten_on']}; control record "
            f"{answer['control']} says so")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=answer)


CALLS = {"recall": _recall, "list_stories": _list_stories, "remember": _remember, "forget": _forget}


def build_server(garden: Garden) -> Server:
    """The low-level server: only `tools/list` and `tools/call` are handled, so tools are
    all it advertises."""
    listed = tools(garden)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = CALLS.get(params.name) if any(t.name == params.name for t in listed) else None
        if call is None:   # not a call the server can make: a protocol error, not a tool's
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {one_line(params.name, 80)}; this "
                           f"server has {', '.join(t.name for t in listed)}")
        try:
            # the query blocks (the pipeline, the trace write): a worker thread runs it
            return await anyio.to_thread.run_sync(call, garden, params.arguments or {})
        except RequestError as exc:
            return refused(exc)

    writes = any(tool.name == "remember" for tool in listed)
    return Server("garden", version=version(), title="garden", instructions=INSTRUCTIONS + (WRITING if writes else ""),
                  on_list_tools=list_tools, on_call_tool=call_tool)


def protocol_error(exc: Exception) -> SessionMessage:
    """The JSON-RPC error for a line on stdin that is not a message: -32700 when it is not
    JSON at all, -32600 when it is JSON but no JSON-RPC message (its id unknown either way)."""
    kinds = {e.get("type") for e in getattr(exc, "errors", lambda: [])()}
    code, what = ((types.PARSE_ERROR, "Parse error: the line is not JSON") if "json_invalid" in kinds
                  else (types.INVALID_REQUEST, "Invalid Request: the line is not a JSON-RPC message"))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=what)))


async def _serve_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        messages, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def answer_unreadable() -> None:
            """Every message on to the server; a line it cannot read answered here."""
            async with messages:
                async for item in read:
                    if isinstance(item, Exception):
                        await write.send(protocol_error(item))
                    else:
                        await messages.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_unreadable)
            await server.run(received, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()


def run_stdio(garden: Garden) -> None:
    anyio.run(_serve_stdio, build_server(garden))
