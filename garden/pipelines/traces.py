"""Traces: one JSON line per query, enough to replay it, with what each stage did.

Files are named ``trace-YYYY-MM-DD.jsonl`` under the derived-data folder, one per day of
writing. Retention deletes only files whose names match that pattern exactly, takes the
age from the name (never from the file's times), skips names that carry an impossible
date, and never follows or removes a symlink. Whatever the window, it never deletes the
file of `today` or of a later day, and a window reaching before the calendar begins deletes
nothing.

Writing survives a writer killed mid-line: each event is one `os.write` of the whole line to
a file opened for appending (never through a link), and a file whose last byte is not a
newline (a torn line) first gets one, so the next event never glues onto the torn one.
Reading skips a line that is not a valid event with one warning naming file:line.

A trace event's model (`TraceEvent`) is defined here, with the file it is a line of: it
carries the query's settings, which the stages declare (garden/rerank/stages.py), so it
sits above them, with the pipelines whose queries it records (docs/layers.md).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from garden._notice import warn
from garden._files import read_regular
from garden.errors import GardenError
from garden.models import Hints, Packet
from garden.rerank.stages import Settings
from garden.derived.home import (FILE_MODE, LINK_REFUSAL, MAX_RETENTION_DAYS, derived_dir, derived_folder,
                                  tracing_enabled)

try:
    import fcntl
except ImportError:   # not on Windows, where appends from two processes are not to be shared anyway
    fcntl = None

TRACE_VERSION = 1
# ASCII digits only, matched in full: `$` alone would also accept a trailing newline
TRACE_NAME = re.compile(r"trace-(\d{4})-(\d{2})-(\d{2})\.jsonl", re.ASCII)
DEFAULT_RETENTION_DAYS = 14

MAX_TRACE_BYTES = 1 << 30   # a trace is a day's log; past a gibibyte it is not one this reads whole


class TraceEvent(BaseModel):
    """One line of a trace file: enough to replay the query, and what each stage did."""

    # No float in it may be NaN or infinite, `stages` included (typed Any, so checked by
    # hand below): a null score would make the line unreadable to `garden compare` (RFC
    # 8259, section 6: JSON numbers are finite). Serialized, a non-finite number is written
    # as the bare token NaN or Infinity rather than null, so that `write_trace` can see one
    # in an event built unchecked (`model_construct`) with a scan of the line's bytes.
    model_config = ConfigDict(allow_inf_nan=False, ser_json_inf_nan="constants")

    version: int = 1
    story: str
    story_path: str | None = None
    query: str
    as_of: dt.date
    hints: Hints = Hints()
    budget: int
    include_private: bool = False
    settings: Settings = Field(default_factory=lambda: Settings())
    session: list[str] = []
    pipeline: str
    case: str | None = None
    case_path: str | None = None
    stages: dict[str, Any] = {}
    timings_ms: dict[str, float] = {}
    packet: Packet

    @field_validator("stages")
    @classmethod
    def _stages_are_finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not _holds_non_finite(value):   # the common case, without building a path per value
            return value
        pending: list[tuple[str, Any]] = [(k, v) for k, v in value.items()]
        while pending:  # a work list rather than recursion: no shape of stages meets the recursion limit
            where, item = pending.pop()
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"{where} is {item!r}; every number in a trace must be finite")
            if isinstance(item, dict):
                pending.extend((f"{where}.{k}", v) for k, v in item.items())
            elif isinstance(item, (list, tuple)):
                pending.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        return value


def _holds_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in `value` (dicts, lists and tuples walked).
    A trace's stages hold thousands of numbers a query, so this pass names no path; the
    validator above walks again, naming one, only when this finds something."""
    pending = [value]
    isfinite = math.isfinite
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is float or isinstance(item, float):
            if not isfinite(item):
                return True
        elif kind is dict:
            pending.extend(item.values())
        elif kind is list or kind is tuple or isinstance(item, (dict, list, tuple)):
            pending.extend(item.values() if isinstance(item, dict) else item)
    return False


def trace_dir() -> Path:
    return derived_dir() / "traces"


def trace_file(day: dt.date) -> Path:
    return trace_dir() / f"trace-{day.isoformat()}.jsonl"


def write_trace(event: TraceEvent, day: dt.date | None = None) -> Path:
    """Append one event; `day` names the file (the day of writing, not the story's as_of)."""
    if not tracing_enabled():
        return Path(os.devnull)
    derived_folder("traces")  # made if missing; refused if a link or not a folder
    path = trace_file(day or dt.date.today())
    line = (event.model_dump_json() + "\n").encode("utf-8")
    if b"NaN" in line or b"Infinity" in line:
        # a non-finite number (or those letters in some text): an event the pipeline built
        # unchecked is checked in full now, and refused naming where the number is
        TraceEvent.model_validate(event.model_dump())
    return append_line(path, line, "trace")


def write_log_file(day: dt.date) -> Path:
    return trace_dir() / f"writes-{day.isoformat()}.jsonl"


def log_write(entry: dict[str, Any], day: dt.date) -> Path:
    """Append one write a server made (tool, story, id, ...) to the day's log of writes,
    beside the day's trace and written as it is; a file of its own, so that every reader of
    traces reads queries only."""
    if not tracing_enabled():
        return Path(os.devnull)
    derived_folder("traces")
    line = (json.dumps({"version": TRACE_VERSION, **entry}, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    return append_line(write_log_file(day), line, "log of writes")


def append_line(path: Path, line: bytes, what: str) -> Path:
    """One whole line appended to the owner-only file at `path`, one writer at a time; a
    torn last line sealed first."""
    # O_NOFOLLOW: a link in place of the file is refused, not written through. O_NONBLOCK:
    # a FIFO in its place cannot make the open hang; a regular file ignores it.
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)  # owner-only: a trace holds every query asked
    except OSError as exc:
        if os.path.islink(path):
            raise GardenError(f"{path} {LINK_REFUSAL}") from None
        raise GardenError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GardenError(f"{path}: exists and is not a regular file; the garden writes its {what} there "
                              "(move it away)")
        if fcntl is not None:
            # one writer at a time: without it, a second process (a server's other worker)
            # could read the size of a line still being written and seal it as torn
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            line = b"\n" + line  # seal a torn last line; the reader skips it, the new event stays whole
        view = memoryview(line)
        while view:  # one write for the whole line; the loop only finishes a short write
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise GardenError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return path


def _parse_event(line: bytes, where: str) -> TraceEvent:
    """One line as an event, or GardenError naming `where` (file:line) and what is wrong."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise GardenError(f"{where}: not a JSON line: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise GardenError(f"{where}: not a JSON line: {exc.msg}") from None
    version = data.get("version") if isinstance(data, dict) else None
    if version != TRACE_VERSION:
        raise GardenError(f"{where}: trace version {version!r} is not {TRACE_VERSION}; "
                          "written by another version of the garden")
    try:
        return TraceEvent.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise GardenError(f"{where}: field {field}: {err['msg']}") from None


def read_trace_lines(path: str | Path, strict: bool = False) -> list[tuple[int, TraceEvent]]:
    """(line number, event) for each valid event of a trace file. A line that is not a valid
    event (a line torn by a killed writer, one from another version) is skipped with one
    warning naming file:line; with `strict` it is a GardenError instead."""
    path = Path(path)
    raw = read_regular(path, MAX_TRACE_BYTES, "trace file")
    events = []
    # split on b"\n" alone: a torn line may end inside a multi-byte character, and the
    # lines after it must still decode
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            events.append((n, _parse_event(line, f"{path}:{n}")))
        except GardenError as exc:
            if strict:
                raise
            warn(f"{exc.messages[0]}; line skipped")
    return events


def read_trace(path: str | Path, strict: bool = False) -> list[TraceEvent]:
    """The valid events of a trace file, in order; see `read_trace_lines` for what is skipped."""
    return [event for _, event in read_trace_lines(path, strict)]


def trace_day(name: str) -> dt.date | None:
    """The date a trace file's name carries, or None if the name is not a trace name or the
    date is impossible (2030-02-30)."""
    m = TRACE_NAME.fullmatch(name)
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def check_keep_days(keep_days: int, source: str = "keep_days") -> int:
    if not 0 <= keep_days <= MAX_RETENTION_DAYS:
        raise GardenError(f"{source} must be a whole number of days from 0 to {MAX_RETENTION_DAYS}, "
                          f"got {keep_days}")
    return keep_days


def prune_traces(today: dt.date, keep_days: int = DEFAULT_RETENTION_DAYS, folder: Path | None = None) -> list[Path]:
    """Delete trace files older than `keep_days` before `today`; return what was deleted."""
    check_keep_days(keep_days)
    folder = folder or trace_dir()
    if not folder.is_dir() or folder.is_symlink():
        return []
    try:
        cutoff = today - dt.timedelta(days=keep_days)
    except OverflowError:
        return []  # the window reaches before the calendar begins: nothing is older
    cutoff = min(cutoff, today)  # today's file and later ones are never deleted
    removed = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            continue
        day = trace_day(entry.name)
        if day is None or day >= cutoff:
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue  # pruned meanwhile by another process
        except OSError as exc:
            warn(f"{entry.path}: cannot remove an expired trace: {exc.strerror or exc}")
            continue
        removed.append(Path(entry.path))
    return removed
