"""The garden as an MCP server over stdio, with the official SDK (`mcp`, MCPServer).

Two tools:

- ``recall(text, story=None, budget=1200, as_of=None, pipeline="default")``: one query; the
  packet (exactly what `garden query --json` prints) as structured content, and a short
  rendering of it as text for a model to read. Written to the trace like any query.
- ``list_stories()``: the stories served, as `GET /stories` lists them.

A refused call is a tool error (``isError``) whose text is the one line HTTP would send,
prefixed by the field it is about. The SDK diverts file descriptor 1 to stderr while it
serves, so nothing the garden prints can reach the wire.
"""
from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from garden.models import DEFAULT_BUDGET
from garden.serve._core import Garden, RequestError
from garden.text import one_line

INSTRUCTIONS = ("Recall what a person's stored memories say about a question. Call recall with the question as "
                "text; each item of the packet carries its labels (current, superseded, ...) and why it was "
                "chosen. decision is retrieve, ask (ambiguous: ask the user which one) or abstain (nothing "
                "stored answers it).")
TEXT_ITEM_LIMIT = 240   # characters of one item's text in the readable rendering (the packet holds it whole)
SITTINGS_RENDERED = 3   # sittings named in the readable rendering (the packet lists up to ten)


def render(packet: dict) -> str:
    """A packet as a few lines a model reads: the decision and reason, then one line per item."""
    lines = [f"decision: {packet['decision']} ({packet['reason']})"]
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


def _refused(exc: RequestError) -> CallToolResult:
    where = f"{exc.field}: " if exc.field and not exc.message.startswith(exc.field) else ""
    return CallToolResult(content=[TextContent(type="text", text=f"refused: {where}{exc.message}")],
                          structured_content=exc.to_json(), is_error=True)


def build_server(garden: Garden) -> MCPServer:
    server = MCPServer(name="garden", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(title="Recall from the garden")
    def recall(text: str, story: str | None = None, budget: int = DEFAULT_BUDGET, as_of: str | None = None,
               pipeline: str = "default") -> CallToolResult:
        """Ask the stored memories a question. Returns the packet: decision (retrieve, ask or
        abstain), reason, and items (id, kind, labels, why, text, at), within `budget`
        characters, and the best sittings it was found in (score, rank, the records that
        carried it). `story` names the store to ask (see list_stories; optional when one is
        served); `as_of` is the date to answer as of (YYYY-MM-DD; default: the latest the
        story mentions)."""
        body: dict[str, Any] = {"text": text, "budget": budget, "pipeline": pipeline}
        if story is not None:
            body["story"] = story
        if as_of is not None:
            body["as_of"] = as_of
        try:
            packet = garden.query(body)   # a worker thread runs this tool; the garden's lock serializes
        except RequestError as exc:
            return _refused(exc)
        return CallToolResult(content=[TextContent(type="text", text=render(packet))], structured_content=packet)

    @server.tool(title="List the stories served")
    def list_stories() -> CallToolResult:
        """The stories this server answers for: name, file, story id, number of records, and
        whether the story builds (a broken edit says why)."""
        rows = garden.stories()
        text = "\n".join(f"{r['name']}: {r['records']} records ({r['path']})" if r["ok"]
                         else f"{r['name']}: does not build: {r['error']}" for r in rows)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"stories": rows})

    return server


def run_stdio(garden: Garden) -> None:
    build_server(garden).run("stdio")
