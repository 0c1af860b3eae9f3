"""What a served garden writes, and only where its operator lets it: `remember` and `forget`,
over HTTP (`POST /remember`, `POST /forget`) and MCP alike (docs/serve.md, "Writing").

The operator names the writable stories (`garden serve --writable NAME`, each a JSON Lines
story) when the server starts; a request picks one by name and can set nothing else about
where or how it is written. Every field is checked here, for its type and its bound, by
one schema for both doors (`write_schema`), each refusal naming its field; what the story
itself refuses (an unknown topic, a supersession of the wrong kind) is refused by its
writer (`garden.formats.story_writer`), named the same way, with nothing written. The
bounds (`WriteBounds`): a record's text, the labels and the ids a request names, the
records one request writes (one, and with `supersedes` the one it marks), a story's size
on disk, and the writes a minute the whole server takes (counted across its workers, in
memory made before they fork).

A write is answered once it is on disk; the next query, whichever worker answers it, reads
the story again (the shelf sees the file changed) and so sees it. Each write is logged
beside the day's trace (`writes-YYYY-MM-DD.jsonl`: tool, story, id), as each query is
traced. The clock is read in one place, `server_today`, which a test replaces.
"""
from __future__ import annotations

import datetime as dt
import time
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable

from garden.errors import GardenError
from garden.formats.story_writer import WRITTEN_KINDS
from garden.serve._core import DATE, Garden, RequestError, _first_line, _kind, not_served
from garden.text import one_line, shown

MAX_WRITE_CHARS = 8_000        # a record's text: a memory, not a document
MAX_LABELS = 32                # topics, and entities, a record names
MAX_NAME_CHARS = 200           # a topic, entity or record id a request names
RECORDS_A_REQUEST = 1          # records one request writes (with `supersedes`, it also marks the old one)
MAX_STORY_BYTES = 256 * 1024 * 1024   # a writable story's size on disk, past which it takes no more
WRITES_A_MINUTE = 1_200        # writes the whole server answers in any one minute
REMEMBER_FIELDS = ("story", "text", "kind", "at", "topics", "entities", "private", "supersedes")
FORGET_FIELDS = ("story", "id")
KINDS = WRITTEN_KINDS
_DATE = {"type": "string", "format": "date"}
REMEMBERED_SCHEMA = {"type": "object", "required": ["id", "story", "kind", "at", "dated_by", "supersedes"],
                     "properties": {"id": {"type": "string", "description": "the new record's id, made by the server"},
                                    "story": {"type": "string"}, "kind": {"type": "string", "enum": list(KINDS)},
                                    "at": _DATE, "dated_by": {"type": "string", "enum": ["request", "server"]},
                                    "supersedes": {"type": ["string", "null"]}}}
FORGOTTEN_SCHEMA = {"type": "object", "required": ["id", "story", "forgotten_on", "control"],
                    "properties": {"id": {"type": "string", "description": "the record forgotten"},
                                   "story": {"type": "string"}, "forgotten_on": _DATE,
                                   "control": {"type": "string", "description": "the control record that says so"}}}


def server_today() -> dt.date:
    """The server's today: the one place a served garden reads the clock."""
    return dt.date.today()


@dataclass(frozen=True)
class WriteBounds:
    text_chars: int = MAX_WRITE_CHARS
    story_bytes: int = MAX_STORY_BYTES
    writes_a_minute: int = WRITES_A_MINUTE


class WriteRate:
    """The writes answered in the current minute, by every worker of a server: made before
    the workers fork, so they share one window (`multiprocessing` shared memory and its lock)."""

    def __init__(self):
        import multiprocessing

        self._lock = multiprocessing.Lock()
        self._values = multiprocessing.RawArray("q", 2)   # the minute (since the epoch), writes in it

    def take(self, limit: int, now: float | None = None) -> bool:
        """One write counted, if the minute has room for it; False when it has none."""
        minute = int((time.time() if now is None else now) // 60)
        with self._lock:
            if self._values[0] != minute:
                self._values[0], self._values[1] = minute, 0
            if self._values[1] >= limit:
                return False
            self._values[1] += 1
            return True


@dataclass
class Writing:
    """What the operator lets a server write: the stories by name, the bounds, the clock."""

    stories: tuple[str, ...] = ()
    bounds: WriteBounds = WriteBounds()
    clock: Callable[[], dt.date] = server_today
    rate: WriteRate | None = None   # None: no limit a minute (a server always has one)

    @classmethod
    def check(cls, names: list[str] | tuple[str, ...], paths: dict, **kw) -> "Writing":
        """The stories named writable: each one served and JSON Lines; GardenError otherwise."""
        from garden.formats.story_writer import refuse_unwritable

        problems = []
        for name in names:
            if name not in paths:
                problems.append(f"--writable {name}: not a story served here (served: {', '.join(paths)})")
                continue
            try:
                refuse_unwritable(paths[name], name)
            except GardenError as exc:
                problems += exc.messages
        if problems:
            raise GardenError(problems)
        return cls(tuple(dict.fromkeys(names)), rate=WriteRate(), **kw)


def write_schema(fields: tuple[str, ...], writable: list[str] | tuple[str, ...]) -> dict:
    """The JSON Schema of a write's `fields` (`remember`'s or `forget`'s), for `POST
    /remember` and MCP's `remember` alike; `writable`: the only values `story` takes."""
    name = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS}
    labels = {"type": ["array", "null"], "maxItems": MAX_LABELS, "items": name}
    every = {
        "story": {"type": "string", "description": "a story the operator made writable",
                  **({"enum": list(writable)} if writable else {})},
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_WRITE_CHARS, "description": "what to remember"},
        "kind": {"type": ["string", "null"], "enum": [*KINDS, None], "default": "source",
                 "description": "source (what was said or seen), note, state (how something is now) or decision"},
        "at": {"type": ["string", "null"], "format": "date", "pattern": f"^{DATE.pattern}$",
               "description": "when it was said, observed or decided, YYYY-MM-DD (default: the server's today)"},
        "topics": {**labels, "description": "canonical topic ids of the story"},
        "entities": {**labels, "description": "canonical entity ids of the story"},
        "private": {"type": ["boolean", "null"], "default": False,
                    "description": "private: served only to a query that allows private records"},
        "supersedes": {**name, "type": ["string", "null"],
                       "description": "the id of an earlier state or decision of the same kind this one replaces"},
        "id": {**name, "description": "the id of the record to forget"},
    }
    required = [f for f in ("story", "text", "id") if f in fields]
    return {"type": "object", "additionalProperties": False, "required": required,
            "properties": {f: every[f] for f in fields}}


class _Body:
    """A write's body, its fields read one by one, each refusal naming its field."""

    def __init__(self, body: Any, fields: tuple[str, ...], tool: str):
        if not isinstance(body, dict):
            raise RequestError(400, f"the request body must be a JSON object, not {_kind(body)}", "body")
        unknown = [k for k in body if k not in fields]
        if unknown:
            raise RequestError(422, f"unknown field {shown(unknown[0], 80)}; {tool} takes " + ", ".join(fields),
                               one_line(unknown[0], 80))
        self.body = body

    def get(self, name: str, types: tuple, what: str, default: Any = None) -> Any:
        value = self.body.get(name)
        if value is None:
            return default
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise RequestError(422, f"{name}: must be {what}, got {_kind(value)} {shown(value, 80)}", name)
        return value

    def required(self, name: str, what: str) -> str:
        value = self.get(name, (str,), what)
        if value is None or not value.strip():
            raise RequestError(422, f"{name}: required: {what}", name)
        return value

    def name(self, name: str, value: str, where: str | None = None) -> str:
        if len(value) > MAX_NAME_CHARS or any(c in value for c in "/\\\0"):
            raise RequestError(422, f"{where or name}: not an id (at most {MAX_NAME_CHARS} characters, no path "
                               f"separator): {shown(value, 80)}", name)
        return value

    def story(self, writable: tuple[str, ...], served: list[str]) -> str:
        story = self.required("story", "a story the operator made writable")
        if story not in served:
            raise not_served(story, served)
        if story not in writable:
            raise RequestError(403, f"story: {shown(story, 80)} is not writable here; writable: "
                               f"{', '.join(writable) or 'none'} (the server's operator chooses them: "
                               "garden serve --writable NAME)", "story")
        return story

    def labels(self, name: str) -> list[str]:
        values = self.get(name, (list,), "a list of canonical ids") or []
        if len(values) > MAX_LABELS:
            raise RequestError(422, f"{name}: at most {MAX_LABELS} ids, got {len(values)}", name)
        for n, value in enumerate(values, start=1):
            if not isinstance(value, str):
                raise RequestError(422, f"{name}: id #{n}: must be a string, got {_kind(value)}", name)
            self.name(name, value, f"{name}: id #{n}")
        return list(dict.fromkeys(values))


NOTHING_WRITABLE = Writing()


def parse_memory(body: Any, garden: Garden, today: dt.date):
    """(story, Memory, who dated it: "request" or "server") from a `remember` body."""
    from garden.formats.story_writer import Memory

    b = _Body(body, REMEMBER_FIELDS, "remember")
    writing = garden.writing or NOTHING_WRITABLE
    story = b.story(writing.stories, garden.shelf.names())
    text = b.required("text", "what to remember, a string")
    if len(text) > writing.bounds.text_chars:
        raise RequestError(422, f"text: at most {writing.bounds.text_chars:,} characters, got {len(text):,}", "text")
    bad = sorted({ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r"})
    if bad:   # a NUL or an escape sequence stored would reach every terminal that shows the record
        raise RequestError(422, "text: holds control characters (" + ", ".join(f"U+{ord(c):04X}" for c in bad)
                           + "); a memory is text", "text")
    kind = b.get("kind", (str,), "one of " + ", ".join(KINDS), "source")
    if kind not in KINDS:
        raise RequestError(422, f"kind: one of {', '.join(KINDS)}, got {shown(kind, 80)}", "kind")
    at = b.get("at", (str,), "a date, YYYY-MM-DD")
    dated_by = "request"
    if at is None:
        at, dated_by = today, "server"
    else:
        try:
            if not DATE.fullmatch(at):
                raise ValueError
            at = dt.date.fromisoformat(at)
        except ValueError:
            raise RequestError(422, f"at: not a date (YYYY-MM-DD): {shown(at, 80)}", "at") from None
    supersedes = b.get("supersedes", (str,), "the id of an earlier state or decision")
    if supersedes is not None:
        b.name("supersedes", supersedes)
    memory = Memory(text=text, at=at, kind=kind, topics=b.labels("topics"), entities=b.labels("entities"),
                    private=b.get("private", (bool,), "true or false", False), supersedes=supersedes)
    return story, memory, dated_by


def _written(garden: Garden, tool: str, story: str, write: Callable[[], Any]) -> Any:
    """Run one write under the garden's lock (the story writer's file lock guards it from
    the other workers), mapping the story's refusals to the request's."""
    from garden.formats.story_writer import WriteRefused

    rate = garden.writing.rate
    if rate is not None and not rate.take(garden.writing.bounds.writes_a_minute):
        raise RequestError(429, f"story: the server takes at most {garden.writing.bounds.writes_a_minute:,} writes "
                           "a minute; try again in a minute", "story")
    with garden.lock:
        try:
            return write()
        except WriteRefused as exc:
            raise RequestError(exc.status, exc.messages[0], exc.field) from None
        except GardenError as exc:   # the disk, the file: the server's fault, not the request's
            raise RequestError(500, f"{tool}: story {story}: {_first_line(exc)}") from None


def _counted(garden: Garden, work: Callable[[], dict]) -> dict:
    """`work()`'s answer; a refusal counted with the server's refused requests (a write
    answered is no query: `/health` counts the queries answered)."""
    try:
        return work()
    except RequestError:
        garden.counts.add(refused=True)
        raise


def remember(garden: Garden, body: Any) -> dict:
    """Write one record to a writable story; its id, once it is on disk."""
    from garden.formats import story_writer
    from garden.pipelines.traces import log_write

    def work() -> dict:
        today = (garden.writing or NOTHING_WRITABLE).clock()
        story, memory, dated_by = parse_memory(body, garden, today)
        path = garden.shelf.paths[story]
        rid = _written(garden, "remember", story, lambda: story_writer.remember(
            path, lambda: garden.shelf.get(story)[0], memory, garden.writing.bounds.story_bytes))
        answer = {"id": rid, "story": story, "kind": memory.kind, "at": memory.at.isoformat(), "dated_by": dated_by,
                  "supersedes": memory.supersedes}
        _log(log_write, {"tool": "remember", **answer}, today)
        return answer

    return _counted(garden, work)


def forget(garden: Garden, body: Any) -> dict:
    """Take one record out of a writable story, and write the control record that says so."""
    from garden.formats import story_writer
    from garden.pipelines.traces import log_write

    def work() -> dict:
        writing = garden.writing or NOTHING_WRITABLE
        today = writing.clock()
        b = _Body(body, FORGET_FIELDS, "forget")
        story = b.story(writing.stories, garden.shelf.names())
        rid = b.name("id", b.required("id", "the id of the record to forget"))
        path = garden.shelf.paths[story]
        control = _written(garden, "forget", story, lambda: story_writer.forget(
            path, lambda: garden.shelf.get(story)[0], rid, today))
        answer = {"id": rid, "story": story, "forgotten_on": today.isoformat(), "control": control}
        _log(log_write, {"tool": "forget", **answer}, today)
        return answer

    return _counted(garden, work)


def _log(log_write, entry: dict, today: dt.date) -> None:
    """The write is on disk and answered whatever becomes of its log line: a log that cannot
    be written is said on stderr, never turned into a refusal of a write that happened."""
    from garden._notice import warn

    try:
        log_write(entry, today)
    except (GardenError, OSError) as exc:
        warn(f"{entry['tool']} {entry['story']} {entry['id']}: written, but not logged: {exc}")
