"""Writing to a JSON Lines story while it is served: a record remembered is appended, a
record forgotten or superseded replaces the file whole; one writer at a time, whatever the
process; nothing answered before it is on disk.

- **One writer at a time.** Every write holds an exclusive `flock` on the story file from
  before it reads the story to after its bytes are synced. A file replaced while a writer
  waited for the lock (a forget or a supersession renames a new file over the old) is not
  the story any more: the writer locks the file that is there now and reads it again.
- **On disk before it is answered.** An append is one `write` of the whole line, then
  `fsync`; a replacement is a new file written whole and synced, renamed over the old one,
  and the folder synced, so the story is the old file or the new one, never a mix. A
  write that fails part-way (a full disk) is cut back to the size before it.
- **A torn last line.** A writer killed in the middle of its `write` leaves a last line
  without its newline: a write never answered. The reader sets it aside
  (`garden.formats.jsonl_reader`: skipped, with one warning), and the next writer cuts it
  off before it appends, so nothing glues onto it. A last line that is whole JSON but only
  lacks its newline (a file edited by hand) is kept and given one.
- **Checked as `garden check` checks.** What a write adds is a record the server made (its
  id, its dates), read by the story's schema and its rules (`semantic_errors`: canonical
  topics and entities, text, dates) against the story as it is under the lock, with what
  a record alone cannot show checked here: a supersession of a live record of the same
  kind, a forget that leaves no reference dangling. A refused write (`WriteRefused`,
  naming the request's field) changes nothing.

Ids are the server's, never the request's: `KIND.NNNNNN`, one past the highest number any
id of that form in the story holds, so an id is never given twice, even after a forget.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from pydantic import ValidationError

from garden._notice import warn
from garden.derived.home import write_whole
from garden.errors import GardenError
from garden.formats.jsonl_reader import SUFFIX
from garden.formats.yaml_reader import describe_pydantic_error
from garden.models import Record, Story
from garden.text import shown_id

try:
    import fcntl
except ImportError:   # no advisory locks: a served story is written by one process only
    fcntl = None

WRITTEN_KINDS = ("source", "note", "state", "decision")   # what a request may remember
SUPERSEDABLE = ("state", "decision")
WRITTEN_ID = re.compile(r"(?:source|note|state|decision|control)\.(\d{6,})", re.ASCII)
TAIL_CHUNK = 64 * 1024   # bytes read at a time, from the end, to find a torn line's start


class WriteRefused(GardenError):
    """A write the story refuses: one line, and the request field it is about. Nothing was written."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.status = status   # as a server answers it: 422 a field refused, 507 a story full


@dataclass(frozen=True)
class Memory:
    """What a request asks to remember, its fields checked for type and bound by the caller."""

    text: str
    at: dt.date
    kind: str = "source"
    topics: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    private: bool = False
    supersedes: str | None = None


def refuse_unwritable(path: Path, name: str) -> None:
    """GardenError unless `path` is a JSON Lines story file the user may write."""
    if path.suffix != SUFFIX:
        raise GardenError(f"--writable {name}: {path} is not JSON Lines; a story written while it is served is "
                          f"NAME{SUFFIX} (one record a line, appended whole)")
    if path.is_symlink() or not path.is_file():
        raise GardenError(f"--writable {name}: {path} is not a regular file; the server writes files, not through "
                          "links")
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise GardenError(f"--writable {name}: {path} (or its folder, where a story written anew is renamed into "
                          "place) may not be written by this user")


@contextmanager
def locked(path: Path) -> Iterator[int]:
    """The story file open for reading and writing, held under an exclusive lock: the file
    at `path` now, even if another writer replaced it while this one waited."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise GardenError(f"{path}: cannot open the story to write it: {exc.strerror or exc}") from None
        try:
            held = os.fstat(fd)
            if not stat.S_ISREG(held.st_mode):
                raise GardenError(f"{path}: not a regular file; refused")
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                there = os.stat(path)
            except FileNotFoundError:
                there = None
            if there is not None and (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)   # replaced while this writer waited: lock the file that is there now
    try:
        yield fd
    finally:
        os.close(fd)   # closing the file releases the lock


def seal_tail(fd: int, path: Path) -> int:
    """Cut off a torn last line (a write never answered), or give a whole last line its
    newline; the file's size after."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    start, keep = size, 0
    while start > 0:
        start = max(0, start - TAIL_CHUNK)
        found = os.pread(fd, min(TAIL_CHUNK, size - start), start).rfind(b"\n")
        if found >= 0:
            keep = start + found + 1
            break
    tail = os.pread(fd, size - keep, keep)
    try:
        whole = isinstance(json.loads(tail), dict)
    except ValueError:
        whole = False
    if whole:
        _append(fd, b"\n")
        return size + 1
    if keep == 0:
        raise GardenError(f"{path}: holds no whole line, not even its header; refused")
    warn(f"{path}: a torn last line ({size - keep:,} bytes, a write never answered) set aside")
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return keep


def _append(fd: int, data: bytes) -> None:
    """`data` at the end of the file, synced; on failure, the file cut back as it was."""
    size = os.lseek(fd, 0, os.SEEK_END)
    try:
        view = memoryview(data)
        while view:   # one write for the whole; the loop only finishes a short write
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        os.ftruncate(fd, size)
        raise GardenError(f"cannot write the story: {exc.strerror or exc}; nothing written") from None


def _replace(path: Path, fd: int, rid: str, change: Callable[[dict], dict | None], extra: bytes) -> None:
    """The story written anew: record `rid`'s line through `change` (None: left out), every
    other line as it was, `extra` appended; renamed over the old file, whose lock `fd` holds."""
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        lines = fh.read().split(b"\n")
    needle = json.dumps(rid).encode("utf-8")
    out: list[bytes] = [lines[0] + b"\n"]
    for line in lines[1:]:
        if not line.strip():
            continue
        record = json.loads(line) if needle in line else None
        if record is None or record.get("id") != rid:
            out.append(line + b"\n")
        elif (changed := change(record)) is not None:
            out.append(_line(changed))
    out.append(extra)
    try:
        write_whole(path, b"".join(out))
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)   # the rename itself on disk
        finally:
            os.close(folder)
    except OSError as exc:
        raise GardenError(f"{path}: cannot write the story: {exc.strerror or exc}; nothing written") from None


def _line(record: dict) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def next_id(story: Story, kind: str) -> str:
    """The server's id for a new record of `kind`: one past the highest written number."""
    numbers = [int(m.group(1)) for r in story.records if (m := WRITTEN_ID.fullmatch(r.id))]
    return f"{kind}.{max(numbers, default=0) + 1:06d}"


def _predecessor(story: Story, memory: Memory) -> Record | None:
    if memory.supersedes is None:
        return None
    old = story.by_id.get(memory.supersedes)
    where = f"{shown_id(memory.supersedes)}"
    if old is None:
        raise WriteRefused("supersedes", f"{where} names no record of story {story.name}")
    if memory.kind not in SUPERSEDABLE or old.kind != memory.kind:
        raise WriteRefused("supersedes", f"{where} is a {old.kind}; only a state or a decision is superseded, by "
                           f"one of its own kind (this is a {memory.kind})")
    if old.status == "superseded" or old.superseded_by:
        raise WriteRefused("supersedes", f"{where} is already superseded"
                           + (f" by {shown_id(old.superseded_by)}" if old.superseded_by else ""))
    if old.appeared_at is not None and memory.at < old.appeared_at:
        raise WriteRefused("at", f"{memory.at} is before {where} appeared ({old.appeared_at}); a successor comes "
                           "after what it supersedes")
    return old


def _made(raw: dict, story: Story, path: Path) -> Record:
    """The record as `garden check` reads it: its schema, then the story's rules on it
    (`semantic_errors` of the story's header holding it alone: labels, text, dates); a
    WriteRefused naming the field otherwise."""
    from garden.formats.stories import semantic_errors

    try:
        record = Record.model_validate(raw)
    except ValidationError as exc:
        name, message = describe_pydantic_error(exc.errors()[0])
        raise WriteRefused(name, f"{message} (story {story.name})") from None
    alone = story.model_copy(update={"records": [record]})
    for derived in [k for k in alone.__dict__ if k.startswith("_")]:   # kept on the whole story, not this one
        del alone.__dict__[derived]
    errors = semantic_errors(alone, path)
    if errors:
        found = re.search(r": field (\w+): (.*)", errors[0])
        raise WriteRefused(found.group(1), found.group(2)) if found else WriteRefused("story", errors[0])
    return record


def remember(path: Path, load: Callable[[], Story], memory: Memory, max_bytes: int | None = None) -> str:
    """Write `memory` to the story at `path` (`load()` reads the story as it is now, under
    the lock) and return its id; a supersession marks the old record in the same write.
    `max_bytes`: the story's size on disk it may not pass."""
    with locked(path) as fd:
        size = seal_tail(fd, path)
        story = load()
        old = _predecessor(story, memory)
        rid = next_id(story, memory.kind)
        raw: dict = {"id": rid, "kind": memory.kind, "text": memory.text, "at": memory.at.isoformat()}
        raw.update({k: v for k, v in (("topics", memory.topics), ("entities", memory.entities),
                                      ("private", memory.private)) if v})
        if memory.kind == "state":
            raw.update(status="active", observed_at=raw["at"], valid_from=raw["at"])
        elif memory.kind == "decision":
            raw.update(status="active", decided_at=raw["at"])
        line = _line(_made(raw, story, path).model_dump(mode="json", exclude_defaults=True))
        if max_bytes is not None and size + len(line) + (64 if old else 0) > max_bytes:
            raise WriteRefused("story", f"{story.name} is {size:,} bytes on disk; this record would take it past "
                               f"{max_bytes:,}, the most the server's operator lets it hold", 507)
        if old is None:
            _append(fd, line)
        else:
            _replace(path, fd, old.id, lambda record: {**record, "status": "superseded", "superseded_by": rid},
                     line)
        return rid


def forget(path: Path, load: Callable[[], Story], rid: str, today: dt.date) -> str:
    """Take record `rid` out of the story at `path` and write the control record that says
    what was forgotten and when; return the control record's id."""
    with locked(path) as fd:
        seal_tail(fd, path)
        story = load()
        gone = story.by_id.get(rid)
        if gone is None:
            raise WriteRefused("id", f"{shown_id(rid)} names no record of story {story.name}")
        if gone.kind == "control":
            raise WriteRefused("id", f"{shown_id(rid)} is a control record: the story's own log, never forgotten")
        for r in story.records:
            for name in ("sources", "related", "superseded_by"):
                value = getattr(r, name)
                if rid == value or (isinstance(value, list) and rid in value):
                    raise WriteRefused("id", f"{shown_id(rid)} is named by record {shown_id(r.id)} (field {name}); "
                                             "forget that one first, or nothing would be left for it to name")
        control = next_id(story, "control")
        when = gone.appeared_at.isoformat() if gone.appeared_at else "undated"
        raw = {"id": control, "kind": "control", "at": today.isoformat(), "title": f"forgotten: {rid}",
               "text": f"Record {rid} ({gone.kind}, {when}) was forgotten on {today.isoformat()} at a request to "
                       "the server; its text is no longer held."}
        _replace(path, fd, rid, lambda record: None,
                 _line(_made(raw, story, path).model_dump(mode="json", exclude_defaults=True)))
        return control
