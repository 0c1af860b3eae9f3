"""Traces: one JSON line per query, enough to replay it, with what each stage did.

Files are named ``trace-YYYY-MM-DD.jsonl`` under the derived-data folder, one per day of
writing. Retention deletes only files whose names match that pattern exactly, takes the
age from the name (never from the file's times), skips names that carry an impossible
date, and never follows or removes a symlink.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

from pydantic import ValidationError

from .errors import GardenError
from .models import TraceEvent
from .paths import derived_dir

TRACE_VERSION = 1
# ASCII digits only, matched in full: `$` alone would also accept a trailing newline
TRACE_NAME = re.compile(r"trace-(\d{4})-(\d{2})-(\d{2})\.jsonl", re.ASCII)
DEFAULT_RETENTION_DAYS = 14


def trace_dir() -> Path:
    return derived_dir() / "traces"


def trace_file(day: dt.date) -> Path:
    return trace_dir() / f"trace-{day.isoformat()}.jsonl"


def write_trace(event: TraceEvent, day: dt.date | None = None) -> Path:
    """Append one event; `day` names the file (the day of writing, not the story's as_of)."""
    if os.environ.get("GARDEN_TRACE", "1") == "0":
        return Path(os.devnull)
    path = trace_file(day or dt.date.today())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(event.model_dump_json() + "\n")
    return path


def read_trace(path: str | Path) -> list[TraceEvent]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GardenError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
    events = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GardenError(f"{path}:{n}: not a JSON line: {exc.msg}") from None
        version = data.get("version") if isinstance(data, dict) else None
        if version != TRACE_VERSION:
            raise GardenError(f"{path}:{n}: trace version {version!r} is not {TRACE_VERSION}; "
                              "written by another version of the garden")
        try:
            events.append(TraceEvent.model_validate(data))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise GardenError(f"{path}:{n}: field {field}: {err['msg']}") from None
    return events


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


def prune_traces(today: dt.date, keep_days: int = DEFAULT_RETENTION_DAYS, folder: Path | None = None) -> list[Path]:
    """Delete trace files older than `keep_days` before `today`; return what was deleted."""
    folder = folder or trace_dir()
    if not folder.is_dir() or folder.is_symlink():
        return []
    cutoff = today - dt.timedelta(days=keep_days)
    removed = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
            continue
        day = trace_day(entry.name)
        if day is None or day >= cutoff:
            continue
        os.unlink(entry.path)
        removed.append(Path(entry.path))
    return removed
