"""What a served garden holds and does, whatever the door (HTTP, MCP over stdio or over
Streamable HTTP).

`Shelf` is the set of stories a server answers for, each kept loaded until its file changes
on disk (one `stat` a query tells; an edited file is read again, a broken edit refused with
its located error until it is fixed, and a story written through the server, by any of its
workers, is read again by the next query the same way). `Garden` checks a request field by field, so every
refusal names the field it is about, and runs the query as `garden query` runs it: the same
packet, the same trace line. `request_schema` describes what `parse_request` takes, once,
for `POST /query` and for MCP's `recall` alike. One lock serializes the queries: the
pipeline's caches (indexes, embeddings, the query encoder) are not known to be safe to use
from two threads at once.
"""
from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from garden._files import RACY_NS
from garden.errors import GardenError, StoryError
from garden.formats.query_inputs import DATE, check_texts, read_as_of, read_budget
from garden.models import DEFAULT_BUDGET
from garden.text import one_line, shown

ERROR_LIMIT = 1000                 # characters of one error line, as the command line prints them
# What a request may set, and its bound: each one is work the server does for a caller it
# does not know, so none is open-ended (docs/serve.md, "What a request can choose").
MAX_BUDGET = 1_000_000             # characters: a packet is context for a reader, not a dump of the store
MAX_SESSION = 16                   # earlier queries of a session, each run again to know what it delivered
MAX_QUERY_CHARS = 2_000            # a query's text, and each earlier one's: a question, not a document
MAX_HINTS = 32                     # topic hints and entity hints, each
MAX_SETTING = 1_000                # a whole-number setting (candidates, lane_cap, phrase_ceiling): work grows with it
DEFAULT_DEADLINE = 10.0            # seconds one request may run (garden serve --deadline)
DEFAULT_READ_TIMEOUT = 10.0        # seconds for a request's head, and again for its body (--read-timeout)
DEFAULT_MAX_CONNECTIONS = 64       # open connections a worker holds; past them, 503 (--max-connections)
FIELDS = ("story", "text", "pipeline", "as_of", "budget", "hints", "settings", "include_private", "session")


class RequestError(Exception):
    """A refused request: the HTTP status, one line, and the field it is about (None when
    it is about the request as a whole)."""

    def __init__(self, status: int, message: str, field: str | None = None):
        self.status = status
        self.message = one_line(message, ERROR_LIMIT)
        self.field = field
        super().__init__(self.message)

    def to_json(self) -> dict:
        return {"error": self.message, "field": self.field}


def _first_line(exc: GardenError) -> str:
    """A library error as one line: its first message, and how many more it listed."""
    messages = [m.strip() for m in exc.messages if m.strip()] or [str(exc)]
    more = len(messages) - 1
    return messages[0] + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def not_served(story: str, served: list[str]) -> RequestError:
    return RequestError(404, f"no story named {shown(story, 80)} is served here; served: " + ", ".join(served),
                        "story")


# --- the stories served ---------------------------------------------------------------------


@dataclass
class _Loaded:
    key: tuple            # the file's identity and times when it was read
    racy: bool            # read within RACY_NS of its last change: read again next time
    story: Any = None     # the Story, or None when the file does not build
    error: GardenError | None = None
    held: int | None = None   # the bytes the story was read from, when known to be the file's first ones


@dataclass
class Shelf:
    """The stories served, by name: a name and the file it stands for. A loaded story is
    kept until its file changes (size, times or inode), so a query costs one `stat`, and an
    edit is picked up by the next query without a restart."""

    paths: dict[str, Path]
    loaded: dict[str, _Loaded] = field(default_factory=dict)

    @classmethod
    def open(cls, names: list[str] | None = None, root: Path | None = None) -> "Shelf":
        """The stories named (names in fixtures/ or paths to story files), or every story
        in fixtures/ of `root` (the working folder). A name that finds no file is refused
        here, before anything is served."""
        from garden.formats.stories import find_story_files, resolve_story_path

        root = root or Path.cwd()
        paths: dict[str, Path] = {}
        if names:
            problems = []
            for name in names:
                try:
                    path = resolve_story_path(name, root)
                except GardenError as exc:
                    problems += exc.messages
                    continue
                paths.setdefault(path.stem if name.endswith((".yaml", ".yml", ".jsonl")) else name, path)
            if problems:
                raise GardenError(problems)
        else:
            for path in find_story_files(root):
                if not path.is_symlink():
                    paths.setdefault(path.stem, path)   # NAME.yaml before NAME.jsonl, as a name finds them
        if not paths:
            raise GardenError(f"no stories to serve: {root / 'fixtures'} holds no story file; name one or more")
        return cls(paths)

    def names(self) -> list[str]:
        return list(self.paths)

    def get(self, name: str):
        """The story `name` stands for as its file is now; RequestError if it is not served,
        its file is gone, or it does not build (the located error, the server unharmed)."""
        from garden.formats.stories import load_story

        path = self.paths.get(name)
        if path is None:
            raise not_served(name, list(self.paths))
        try:
            st = os.stat(path)
        except OSError as exc:
            raise RequestError(404, f"story {name}: {path}: {exc.strerror or exc}", "story") from None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        entry = self.loaded.get(name)
        if entry is None or entry.key != key or entry.racy:
            started = time.time_ns()
            try:
                story = _again(path, entry, key)
                entry = _Loaded(key, False, story=load_story(path) if story is None else story)
            except GardenError as exc:
                entry = _Loaded(key, False, error=exc)
            after = os.stat(path)
            # changed while it was read, or so recently that a second change could keep the
            # same size and times: not trusted beyond this query
            changed = (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != key[2:]
            entry.racy = changed or started - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS
            entry.held = None if changed or entry.story is None else key[2]
            replaced = self.loaded.get(name)
            self.loaded[name] = entry
            if replaced is not None and replaced.story is not None and entry.story is not None \
                    and replaced.story is not entry.story:
                from garden.pipelines import release

                release(replaced.story, entry.story)   # a version no query will ask again
        if entry.error is not None:
            status = 422 if isinstance(entry.error, StoryError) or path.exists() else 404
            raise RequestError(status, f"story {name}: {_first_line(entry.error)}", "story")
        return entry.story, path

    def describe(self) -> list[dict]:
        """Each story served: its name, file, story id, record count and whether it builds."""
        out = []
        for name, path in self.paths.items():
            row: dict[str, Any] = {"name": name, "path": str(path)}
            try:
                story, _ = self.get(name)
            except RequestError as exc:
                row.update(ok=False, error=exc.message)
            else:
                row.update(ok=True, story=story.name, records=len(story.records))
            out.append(row)
        return out


def _again(path: Path, entry: _Loaded | None, key: tuple):
    """The story `entry` holds, when its JSON Lines file (the same file, `key`'s device and
    inode) holds the same bytes, or those and whole records appended (a writable story:
    garden.formats.stories.grown_story checks them, and the whole story, as `load_story`
    does); None when the file must be read again whole. So the writes of a server's other
    worker cost the next query the lines they added, not the story."""
    from garden._files import open_regular
    from garden.formats.stories import grown_story

    if entry is None or entry.story is None or entry.held is None or entry.key[:2] != key[:2] \
            or path.suffix != ".jsonl":
        return None
    try:
        with open_regular(path) as fh:
            data = fh.read(key[2] + 1)
    except (OSError, GardenError):
        return None
    if len(data) != key[2]:   # changed since its `stat`: read whole, as ever
        return None
    return grown_story(entry.story, path, data, entry.held)


# --- one query ------------------------------------------------------------------------------


@dataclass
class QueryRequest:
    """A query as the request gave it, each field checked for its type and range."""

    story: str
    text: str
    pipeline: str = "default"
    as_of: dt.date | None = None
    budget: int = DEFAULT_BUDGET
    hints: Mapping[str, Any] | None = None
    settings: Mapping[str, Any] | None = None
    include_private: bool = False
    session: list[str] = field(default_factory=list)


def request_schema(fields: tuple[str, ...] = FIELDS, stories: list[str] | None = None,
                   pipelines: list[str] | None = None) -> dict:
    """The JSON Schema of a query's `fields` (all of them for `POST /query`, the tool's for
    MCP's `recall`): what `parse_request` accepts, said once for both doors. Every optional
    field may be null, which is the same as leaving it out; `budget` is a whole number, and
    a JSON number with no fraction (2.0) is one. `stories`, `pipelines`: the names served,
    the only values those fields take."""
    nullable = {"type": ["string", "null"]}
    names = {"story": stories, "pipeline": pipelines}
    every = {
        "story": {**nullable, "description": "a story served (GET /stories, list_stories); optional when only one "
                                            "is"},
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": "the query"},
        "pipeline": {**nullable, "default": "default", "description": "a pipeline served (GET /pipelines)"},
        "as_of": {**nullable, "format": "date", "pattern": f"^{DATE.pattern}$",
                  "description": "injected now, YYYY-MM-DD (default: the latest date the story mentions)"},
        "budget": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_BUDGET, "default": DEFAULT_BUDGET,
                   "description": "packet budget in characters of item text"},
        "hints": {"type": ["object", "null"], "additionalProperties": False,
                  "properties": {"topics": {"type": "array", "maxItems": MAX_HINTS, "items": {"type": "string"}},
                                 "entities": {"type": "array", "maxItems": MAX_HINTS, "items": {"type": "string"}}}},
        "settings": {"type": ["object", "null"],
                     "description": 'pipeline settings to override, e.g. {"standout": 1.2}; a setting no stage of the '
                                    f"pipeline uses is refused; a whole-number one is at most {MAX_SETTING}"},
        "include_private": {"type": ["boolean", "null"], "default": False,
                            "description": "allow private records into the packet"},
        "session": {"type": ["array", "null"], "maxItems": MAX_SESSION,
                    "items": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                    "description": "the session's earlier queries, oldest first: what they delivered is not served "
                                   "again"},
    }
    properties = {name: dict(every[name]) for name in fields}
    for name, served in names.items():
        if name in properties and served is not None:
            properties[name]["enum"] = [*served, None]
    required = ["text"]
    if "story" in properties and stories is not None and len(stories) != 1:   # only one: it is the default
        properties["story"] = {**properties["story"], "type": "string", "enum": list(stories)}
        required.append("story")
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


def packet_schema(ref_template: str = "#/$defs/{model}") -> dict:
    """The JSON Schema of a served packet: the packet `garden schemas` describes, as
    `garden query --json` prints it (without `fallback`, which a served packet never holds)."""
    from garden.models import Packet

    schema = Packet.model_json_schema(ref_template=ref_template, mode="serialization")
    del schema["properties"]["fallback"]
    return schema


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _check_length(name: str, text: str, where: str | None = None) -> None:
    if len(text) > MAX_QUERY_CHARS:
        raise RequestError(422, f"{where or name}: at most {MAX_QUERY_CHARS:,} characters, got {len(text):,}", name)


def _check_hints(hints: Mapping[str, Any] | None) -> None:
    for kind, names in (hints or {}).items():
        if isinstance(names, list) and len(names) > MAX_HINTS:
            raise RequestError(422, f"hints: {shown(kind, 40)}: at most {MAX_HINTS} names, got {len(names)}", "hints")


def _check_settings(settings: Mapping[str, Any] | None) -> None:
    """A whole-number setting is a count of things the pipeline works through (candidates,
    a lane's items, the records a phrase may be held by): bounded, so one request cannot buy
    work the size of the store. Types and the settings' own bounds are the library's."""
    for name, value in (settings or {}).items():
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SETTING:
            raise RequestError(422, f"settings: {shown(name, 40)}: at most {MAX_SETTING:,} in a request, got "
                               f"{value:,}", "settings")


def _whole(value: Any) -> Any:
    """A JSON number with no fraction (2.0) as the whole number it is (JSON has one kind of
    number, and JSON Schema counts 2.0 an integer); anything else as it came."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _read(field: str, reader, value: Any) -> Any:
    """`value` read as the command line and the API read it (garden.formats.query_inputs),
    its refusal the same line, with this field named for the client."""
    try:
        return reader(value)
    except GardenError as exc:
        raise RequestError(422, exc.messages[0], field) from None


def parse_request(body: Any, stories: list[str], pipelines: list[str] | None = None,
                  fields: tuple[str, ...] = FIELDS) -> QueryRequest:
    """A request body (the parsed JSON) as a QueryRequest; RequestError naming the field
    on the first problem. `pipelines`: the names served (None: any name, for a caller that
    checks it later). Nothing the library checks itself (hints' and settings' fields, the
    query's characters) is checked twice: those are refused by the query, as the command
    line refuses them, and named by their field there; the bounds a server adds are here."""
    if not isinstance(body, dict):
        raise RequestError(400, f"the request body must be a JSON object, not {_kind(body)}", "body")
    unknown = [k for k in body if k not in fields]
    if unknown:
        raise RequestError(422, f"unknown field {shown(unknown[0], 80)}; a query takes "
                           + ", ".join(fields), one_line(unknown[0], 80))

    def typed(name: str, types: tuple, what: str, default: Any = None) -> Any:
        """The field's value, or `default` when it is absent or null; refused unless one of `types`."""
        value = body.get(name)
        if value is None:
            return default
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            got = ("a number past what a double holds (read as infinity)"
                   if isinstance(value, float) and math.isinf(value) else f"{_kind(value)} {shown(value, 80)}")
            raise RequestError(422, f"{name}: must be {what}, got {got}", name)
        return value

    text = typed("text", (str,), "the query, a string")
    if text is None:
        raise RequestError(422, "text: required: the query, a string", "text")
    story = typed("story", (str,), "a story name (see /stories)")
    if story is None:
        if len(stories) != 1:
            raise RequestError(422, "story: required: this server serves " + ", ".join(stories), "story")
        story = stories[0]
    if story not in stories:
        raise not_served(story, stories)
    _check_length("text", text)
    pipeline = typed("pipeline", (str,), "a pipeline name (see /pipelines)", "default")
    if pipelines is not None and pipeline not in pipelines:
        raise RequestError(404, f"pipeline {shown(pipeline, 80)} is not served here; served: {', '.join(pipelines)} "
                           "(the server's operator chooses them, with their options: garden serve --pipelines)",
                           "pipeline")
    as_of = _read("as_of", read_as_of, typed("as_of", (str,), "a date, YYYY-MM-DD"))
    body = {**body, "budget": _whole(body.get("budget"))}   # `typed` reads this body: 2.0 is 2
    budget = _read("budget", read_budget, typed("budget", (int,), "a whole number of characters", DEFAULT_BUDGET))
    if budget > MAX_BUDGET:
        raise RequestError(422, f"budget: at most {MAX_BUDGET:,} characters in a request, got {budget:,}", "budget")
    hints = typed("hints", (dict,), 'an object {"topics": [...], "entities": [...]}')
    _check_hints(hints)
    settings = typed("settings", (dict,), 'an object of pipeline settings, e.g. {"standout": 1.2}')
    _check_settings(settings)
    include_private = typed("include_private", (bool,), "true or false", False)
    session = typed("session", (list,), "a list of the session's earlier queries (strings)") or []
    if len(session) > MAX_SESSION:
        raise RequestError(422, f"session: at most {MAX_SESSION} earlier queries, got {len(session)}", "session")
    for n, earlier in enumerate(session, start=1):
        if not isinstance(earlier, str):
            raise RequestError(422, f"session: query #{n}: must be a string, got {_kind(earlier)}", "session")
        _check_length("session", earlier, f"session: query #{n}")
    return QueryRequest(story, text, pipeline, as_of, budget, hints, settings, include_private, list(session))


# messages of the library, by how they begin, and the field each is about
_PREFIXES = (("query text:", "text"), ("query:", "text"), ("settings:", "settings"), ("hints:", "hints"),
             ("as_of:", "as_of"), ("budget:", "budget"), ("session:", "session"), ("pipeline ", "pipeline"),
             ("unknown pipeline", "pipeline"), ("story ", "story"), ("no story", "story"))


def field_of(message: str) -> str | None:
    if "`as_of`" in message:   # "story S has no dates; pass `as_of`"
        return "as_of"
    return next((name for prefix, name in _PREFIXES if message.startswith(prefix)), None)


class Counts:
    """The queries answered and refused, by every worker of a server. Made before the
    workers fork, so they share one pair of counters (`multiprocessing` shared memory and
    its lock); a single-process server has the same two numbers in the same place."""

    def __init__(self):
        import multiprocessing

        self._lock = multiprocessing.Lock()
        self._values = multiprocessing.RawArray("q", 2)   # answered, refused

    def add(self, refused: bool = False) -> None:
        with self._lock:
            self._values[int(refused)] += 1

    @property
    def queries(self) -> int:
        return self._values[0]

    @property
    def refused(self) -> int:
        return self._values[1]


def served_pipelines(names: list[str] | None = None) -> dict:
    """The pipelines a server serves, made once, by name: `names` (any name `garden query
    --pipeline` takes, options included: the operator's choice), else `default` and the
    bare baselines. Every bare pipeline is made to obey the hard rules (privacy, `as_of`):
    a packet that leaves a server reaches a reader. GardenError listing every name that
    cannot be made."""
    from garden.pipelines import baseline_names, make_pipeline

    made: dict = {}
    problems: list[str] = []
    for name in names or ["default", *baseline_names()]:
        if name in made:
            continue
        try:
            made[name] = make_pipeline(name, hard_rules=True)
        except GardenError as exc:
            problems += [f"--pipelines {name}: {m}" for m in exc.messages]
    if problems:
        raise GardenError(problems)
    return made


class Garden:
    """A served garden: its stories, the pipelines it serves (made when it starts: a request
    picks one by name and can set nothing else about it), the lock its queries take turns
    on, its limit on one request's time, and its counts (shared with the server's other
    workers, if it has any)."""

    def __init__(self, shelf: Shelf, counts: Counts | None = None, pipelines: dict | None = None,
                 deadline: float | None = DEFAULT_DEADLINE, writing: Any = None):
        self.shelf = shelf
        self.writing = writing   # what it may write (garden.serve._writes.Writing); None: nothing
        self.served = served_pipelines() if pipelines is None else pipelines
        self.deadline = deadline
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.counts = counts or Counts()

    @property
    def queries(self) -> int:
        return self.counts.queries

    @property
    def refused(self) -> int:
        return self.counts.refused

    # --- the read-only answers

    def pipelines(self) -> dict[str, str]:
        """Each pipeline served, with one line saying what it does."""
        from garden.pipelines import describe_pipeline

        return {name: describe_pipeline(name) for name in self.served}

    def stories(self) -> list[dict]:
        writable = self.writing.stories if self.writing is not None else ()
        with self.lock:
            return [{**row, "writable": row["name"] in writable} for row in self.shelf.describe()]

    def health(self) -> dict:
        return {"ok": True, "stories": self.shelf.names(), "pipelines": list(self.served),
                "uptime_s": round(time.monotonic() - self.started, 3), "queries": self.queries,
                "refused": self.refused}

    # --- queries

    def warm(self, report=None) -> None:
        """Load each story and run one untraced query on it under each pipeline served, so
        the first real query finds the indexes built and the embedding model loaded."""
        from garden.formats.stories import latest_date
        from garden.pipelines import warm_up
        from garden.rerank.query import QuerySpec

        for name in self.shelf.names():
            try:
                story, path = self.shelf.get(name)
                for pipeline in self.served.values():
                    # untraced, and the model loaded even when this query's vector is cached
                    warm_up(pipeline, QuerySpec(story, "warm", latest_date(story), story_path=str(path)))
            except (RequestError, GardenError) as exc:
                if report is not None:
                    report(f"story {name} is served but does not answer yet: "
                           f"{exc.message if isinstance(exc, RequestError) else _first_line(exc)}")

    def query(self, body: Any, fields: tuple[str, ...] = FIELDS) -> dict:
        """The packet for one request body (of the request `fields` its door takes), exactly
        what `garden query --json` prints for the same inputs (a bare pipeline with the hard
        rules applied), written to the trace as that command writes it; RequestError otherwise."""
        try:
            request = parse_request(body, self.shelf.names(), list(self.served), fields)   # refused without the lock
        except RequestError:
            self.counts.add(refused=True)
            raise
        with self.lock:
            try:
                packet = self._run(request)
            except RequestError:
                self.counts.add(refused=True)
                raise
        self.counts.add()
        return packet

    def _run(self, r: QueryRequest) -> dict:
        """`garden.api.query` on a story kept loaded (reading and checking the file on every
        call would cost half a second on a LoCoMo conversation), with the session's earlier
        queries: the same packet and the same trace line as `garden query`. The fields whose
        refusal has a status of its own are checked first, so each names its field."""
        from garden._deadline import DeadlineExceeded, deadline
        from garden.api import query
        from garden.derived.home import check_environment

        try:
            check_environment()
        except GardenError as exc:
            raise RequestError(500, f"the server's garden home is not usable: {_first_line(exc)}") from None
        try:
            check_texts(r.text, r.session)
        except GardenError as exc:
            line = _first_line(exc)
            raise RequestError(422, line, field_of(line)) from None
        story, path = self.shelf.get(r.story)
        try:
            with deadline(self.deadline):
                return query(story, r.text, pipeline=self.served[r.pipeline], as_of=r.as_of, budget=r.budget,
                             hints=r.hints, settings=r.settings, include_private=bool(r.include_private),
                             trace=True, session=r.session, story_path=path)
        except DeadlineExceeded as exc:
            raise RequestError(503, _first_line(exc)) from None
        except GardenError as exc:
            line = _first_line(exc)
            raise RequestError(422, line, field_of(line)) from None
        except OSError as exc:   # the trace could not be written: the server's fault, not the request's
            where = exc.filename or "the trace"
            raise RequestError(500, f"{where}: {exc.strerror or exc}") from None
