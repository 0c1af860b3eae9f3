"""The garden over HTTP: a Starlette application, served by uvicorn.

    GET  /health        ok, the stories and pipelines served, uptime, queries answered and refused
    GET  /stories       each story served: name, file, story id, records, whether it builds
    GET  /pipelines     every pipeline name with one line saying what it does (`garden pipelines --json`)
    POST /query         one query: the packet `garden query --json` prints, written to the trace
    POST /remember      one record written to a story the operator made writable: its id, once on disk
    POST /forget        one record taken out of a writable story, a control record saying so: its id
    GET  /openapi.json  this interface as OpenAPI 3.1
    POST /mcp           MCP over Streamable HTTP: the tools `garden serve --mcp` serves (garden.serve.mcp)

Every request first passes the access rule (`garden.serve._access`: its `Host`, its
`Origin`, its token, a query's `Content-Type`). Every refusal is one JSON object,
``{"error": "one line", "field": "the field or null"}``, with a 4xx status (400 a body that
is not a JSON object, 401 no token or the wrong one, 403 a foreign `Host` or `Origin`, or a write
to a story not writable, 404 an unknown story, pipeline or path, 408 a body that did not
arrive in time, 413 a body past `MAX_BODY`, 415 a query or write that is not JSON, 422 a
field the query or the story refuses, 429 past the writes a minute); a request past the
server's time limit is a 503, a story past its size on disk a 507, a fault of the server a
500, of the same shape. No traceback
is ever sent, and no request stops the server.
"""
from __future__ import annotations

import asyncio
import json
import sys
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from garden.serve._access import Access
from garden.serve._core import DEFAULT_READ_TIMEOUT, FIELDS, Garden, RequestError, packet_schema, request_schema
from garden.serve._writes import (FORGET_FIELDS, FORGOTTEN_SCHEMA, REMEMBER_FIELDS, REMEMBERED_SCHEMA, forget,
                                  remember, write_schema)
from garden.text import one_line

MAX_BODY = 64 * 1024   # bytes of a request body: a query, its hints, settings and session fit many times over


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (RFC 8259 has no NaN or infinity)")


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


async def _read_body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise RequestError(413, f"the body is more than {MAX_BODY:,} bytes; a query is at most that", "body")
        chunks.append(chunk)
    return b"".join(chunks)


async def _bounded_body(request: Request, timeout: float) -> bytes:
    """The request's body, up to MAX_BODY bytes (its declared length checked before a byte
    is read, the bytes counted as they come) within `timeout` seconds; RequestError otherwise."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isascii() or not declared.isdigit():
            raise RequestError(400, f"Content-Length is not a number of bytes: {one_line(declared, 40)}", "body")
        if int(declared) > MAX_BODY:
            raise RequestError(413, f"the body is {int(declared):,} bytes; a query is at most {MAX_BODY:,}", "body")
    try:
        return await asyncio.wait_for(_read_body(request), timeout)
    except asyncio.TimeoutError:
        raise RequestError(408, f"the body did not arrive within {timeout:g} s", "body") from None


async def read_json(request: Request, timeout: float = DEFAULT_READ_TIMEOUT) -> Any:
    """The request's body as JSON, read up to MAX_BODY bytes within `timeout` seconds (the
    declared length is checked before anything is read, the bytes read are counted as they
    come); RequestError otherwise."""
    raw = await _bounded_body(request, timeout)
    if not raw.strip():
        raise RequestError(400, "the body is empty: send a JSON object with at least text", "body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"the body is not UTF-8 (byte {exc.start})", "body") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_object_without_repeats)
    except RecursionError:
        raise RequestError(400, "the body is not JSON the server reads: nested too deeply", "body") from None
    except ValueError as exc:   # json.JSONDecodeError, a repeated key, NaN, a number of too many digits
        raise RequestError(400, f"the body is not valid JSON: {exc}", "body") from None


class Guarded:
    """The application behind the access rule: a request it refuses never reaches a route
    (nor a 404), and is answered with one JSON line."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers: dict[str, str] = {}
            for name, value in scope["headers"]:
                # a repeated Host or Origin is refused as a name no one answers to, not merged
                key = name.decode("latin-1")
                headers[key] = "\x00" if key in headers and key in ("host", "origin") else value.decode("latin-1")
            refused = self.access.refusal(scope["method"], scope["path"], headers)
            if refused is not None:
                status, message, field, extra = refused
                response = JSONResponse({"error": message, "field": field}, status_code=status,
                                        headers={**extra, "connection": "close"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(garden: Garden, shared: bool = False, access: Access | None = None,
              read_timeout: float = DEFAULT_READ_TIMEOUT):
    """The application answering for `garden`. `shared`: one of several workers on one
    port. Then a query runs on the event loop itself, so a busy worker accepts nothing
    until it is done, and each answer closes its connection, so the next request is
    accepted by whichever worker is idle; a kept-alive connection would stay with the
    worker that first accepted it, and four clients could all queue on one worker while the
    other sits idle. (A new loopback connection costs a fraction of a millisecond.)"""
    close = {"connection": "close"} if shared else None

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(garden.health())

    async def stories(request: Request) -> JSONResponse:
        return JSONResponse({"stories": await run_in_threadpool(garden.stories)})

    async def pipelines(request: Request) -> JSONResponse:
        return JSONResponse(await run_in_threadpool(garden.pipelines))

    def answering(call):
        """The endpoint of a POST whose JSON body `call(body)` answers: a query, a write."""
        async def endpoint(request: Request) -> JSONResponse:
            try:
                body = await read_json(request, read_timeout)
                # the call blocks (the pipeline, the trace, the story written): alone in its
                # process, a worker thread runs it, and the garden's lock lets one run at a time
                answer = call(body) if shared else await run_in_threadpool(call, body)
            except RequestError as exc:
                if exc.status >= 500:
                    print(f"garden: warning: POST {request.url.path}: {exc.message}", file=sys.stderr, flush=True)
                # a body that never came leaves the connection mid-request: it cannot carry another
                return JSONResponse(exc.to_json(), status_code=exc.status,
                                    headers={"connection": "close"} if exc.status == 408 else close)
            return JSONResponse(answer, headers=close)

        return endpoint

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(openapi_document(list(garden.served), garden.shelf.names(),
                                             garden.writing.stories if garden.writing else ()))

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"no such path: {request.url.path}; see /openapi.json"
        elif exc.status_code == 405:
            message = f"{request.method} is not answered at {request.url.path}; see /openapi.json"
        else:
            message = str(exc.detail)
        return JSONResponse({"error": one_line(message, 300), "field": None}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    async def fault(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not bad input: one line to the client and to the server's log, never a traceback
        line = one_line(f"{type(exc).__name__}: {exc}", 300)
        print(f"garden: warning: {request.method} {request.url.path} failed: {line}", file=sys.stderr, flush=True)
        return JSONResponse({"error": f"the server failed on this request: {line}", "field": None}, status_code=500)

    mcp, session_manager = mcp_endpoint(garden, read_timeout)

    @asynccontextmanager
    async def lifespan(app):
        async with session_manager.run():   # the MCP SDK's task group, for the requests to /mcp
            yield

    routes = [Route("/health", health, methods=["GET"]), Route("/stories", stories, methods=["GET"]),
              Route("/pipelines", pipelines, methods=["GET"]),
              Route("/query", answering(garden.query), methods=["POST"]),
              Route("/remember", answering(partial(remember, garden)), methods=["POST"]),
              Route("/forget", answering(partial(forget, garden)), methods=["POST"]),
              Route("/openapi.json", openapi, methods=["GET"]), Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: fault}, lifespan=lifespan)
    return app if access is None else Guarded(app, access)


def mcp_endpoint(garden: Garden, read_timeout: float = DEFAULT_READ_TIMEOUT):
    """MCP over Streamable HTTP (`garden.serve.mcp`'s server), as an ASGI endpoint, and the
    SDK's session manager it runs in. Stateless, each answer one JSON response: any worker
    answers any request, as for `POST /query`. It sits behind the same access rule (`Host`,
    `Origin`, token); a POST's body is read under the same bounds as a query's (MAX_BODY
    bytes, within `read_timeout` seconds) before the SDK sees it; the query under the
    same deadline, the pipelines and stories the operator chose."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from garden.serve.mcp import build_server

    manager = StreamableHTTPSessionManager(
        build_server(garden), json_response=True, stateless=True, max_request_body_size=MAX_BODY,
        # the Host and Origin are the access rule's, with the names the operator allowed
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))

    return MCPEndpoint(manager, read_timeout), manager


class MCPEndpoint:
    """The ASGI application at `/mcp` (a class: Starlette calls a function with a request)."""

    def __init__(self, manager, read_timeout: float):
        self.manager, self.read_timeout = manager, read_timeout

    async def __call__(self, scope, receive, send) -> None:
        if scope["method"] == "POST":
            try:
                raw = await _bounded_body(Request(scope, receive), self.read_timeout)
            except RequestError as exc:
                await JSONResponse(exc.to_json(), status_code=exc.status, headers={"connection": "close"})(
                    scope, receive, send)
                return
            receive = _replaying(raw, receive)
        await self.manager.handle_request(scope, receive, send)


def _replaying(raw: bytes, receive):
    """An ASGI `receive` that hands over a body already read, then waits as the first did."""
    given = False

    async def replay():
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return replay


# --- the interface, described ---------------------------------------------------------------


def _packet_schemas() -> dict:
    """The packet's JSON Schema with its definitions as OpenAPI components."""
    schema = packet_schema("#/components/schemas/{model}")
    return {**schema.pop("$defs", {}), "Packet": schema}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _get(operation: str, summary: str, description: str, schema: dict) -> dict:
    return {"get": {"operationId": operation, "summary": summary, "responses": {"200": {
        "description": description, "content": {"application/json": {"schema": schema}}}}}}


def _write_operation(operation: str, summary: str, request: str, answer: str, error: dict) -> dict:
    codes = {"400": "the body is not a JSON object", "401": "the server asks for its token, and the request did "
             "not carry it", "403": "a Host or Origin other than the server's own, or a story not writable",
             "404": "no such story", "413": f"the body is past {MAX_BODY:,} bytes",
             "415": "the body is not declared application/json",
             "422": "a field is refused (named in `field`): its type, its bound, or what the story refuses",
             "429": "the server has taken as many writes this minute as its operator lets it",
             "500": "the server failed (the disk, a bug): nothing answered as written",
             "507": "the story is as large on disk as its operator lets it be"}
    return {"post": {"operationId": operation, "summary": summary,
                     "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(request)}}},
                     "responses": {"200": {"description": "written and synced to disk",
                                           "content": {"application/json": {"schema": _ref(answer)}}},
                                   **{code: {**error, "description": text} for code, text in codes.items()}}}}


def openapi_document(pipelines: list[str] | None = None, stories: list[str] | None = None,
                     writable: list[str] | tuple[str, ...] = ()) -> dict:
    """This interface as OpenAPI 3.1; `pipelines`, `stories`: the names a server serves (the
    only values its `pipeline` and `story` fields take). The request body's schema is the one
    MCP's `recall` takes its arguments by (`garden.serve._core.request_schema`)."""
    error = {"description": "refused: one line, and the field it is about",
             "content": {"application/json": {"schema": _ref("Error")}}}
    query_request = request_schema(FIELDS, stories, pipelines)
    return {
        "openapi": "3.1.0",
        "info": {"title": "garden serve", "version": "1",
                 "description": "Queries against the stories of one garden store, answered by one warm process. "
                                "Each packet is what `garden query --json` prints for the same inputs, and each "
                                "query is written to the trace as that command writes it."},
        "paths": {
            "/health": _get("health", "is the server up, and what it serves", "ok", _ref("Health")),
            "/stories": _get("listStories", "the stories served",
                             "each story: name, path, story id, records, ok (or error)", _ref("Stories")),
            "/pipelines": _get("listPipelines", "every pipeline name with what it does",
                               "name -> description, as `garden pipelines --json`",
                               {"type": "object", "additionalProperties": {"type": "string"}}),
            "/query": {"post": {
                "operationId": "query",
                "summary": "one query: the packet, written to the trace",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("QueryRequest")}}},
                "responses": {"200": {"description": "the packet `garden query --json` prints",
                                      "content": {"application/json": {"schema": _ref("Packet")}}},
                              "400": {**error, "description": "the body is not a JSON object"},
                              "401": {**error, "description": "the server asks for its token, and the request "
                                                              "did not carry it"},
                              "403": {**error, "description": "a Host or Origin other than the server's own"},
                              "404": {**error, "description": "no such story, or a pipeline not served"},
                              "408": {**error, "description": "the body did not arrive in time"},
                              "413": {**error, "description": f"the body is past {MAX_BODY:,} bytes"},
                              "415": {**error, "description": "the body is not declared application/json"},
                              "422": {**error, "description": "a field is refused (named in `field`), or the "
                                                              "story does not build (its located error)"},
                              "500": {**error, "description": "the server failed (its garden home, a bug)"},
                              "503": {**error, "description": "the query ran past the server's time limit, or "
                                                              "the server holds as many connections as it takes"}}}},
            "/remember": _write_operation("remember", "write one record to a story the operator made writable",
                                          "RememberRequest", "Remembered", error),
            "/forget": _write_operation("forget", "take one record out of a writable story, a control record "
                                        "saying what and when", "ForgetRequest", "Forgotten", error),
            "/openapi.json": _get("openapi", "this document", "OpenAPI 3.1", {"type": "object"}),
        },
        "components": {"schemas": {
            "QueryRequest": query_request,
            "RememberRequest": write_schema(REMEMBER_FIELDS, writable),
            "ForgetRequest": write_schema(FORGET_FIELDS, writable),
            "Remembered": REMEMBERED_SCHEMA,
            "Forgotten": FORGOTTEN_SCHEMA,
            "Error": {"type": "object", "required": ["error", "field"],
                      "properties": {"error": {"type": "string", "description": "one line"},
                                     "field": {"type": ["string", "null"],
                                               "description": "the request field refused, `body` for the body "
                                                              "as a whole, null for none"}}},
            "Health": {"type": "object", "properties": {
                "ok": {"type": "boolean"}, "stories": {"type": "array", "items": {"type": "string"}},
                "pipelines": {"type": "array", "items": {"type": "string"}}, "uptime_s": {"type": "number"},
                "queries": {"type": "integer"}, "refused": {"type": "integer"}}},
            "Stories": {"type": "object", "properties": {"stories": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}, "path": {"type": "string"},
                                                 "ok": {"type": "boolean"}, "story": {"type": "string"},
                                                 "records": {"type": "integer"}, "error": {"type": "string"},
                                                 "writable": {"type": "boolean"}}}}}},
            **_packet_schemas(),
        }},
    }
