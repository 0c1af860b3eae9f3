"""Stories as JSON Lines: the machine-written form of a story, for stores too large for YAML.

Line 1 is the story's header (every field but `records`: story, project, topics, entities
and the rest); every later line is one record. The data is exactly a YAML story's, so
validation is the same; only the reading differs:

- JSON is parsed by the C decoder, about a hundred times faster than the pure-Python YAML
  reader the hand-written stories need for their located errors and hostile-input bounds;
- a writer can stream a story of any size record by record (`garden generate`);
- a line is bounded (`MAX_LINE_BYTES`), not the file: one record cannot be a gigabyte, and
  a hundred thousand records read in seconds;
- a last line without its newline that is not JSON is a write torn by a killed writer (a
  story served writable, garden/formats/story_writer.py), never answered: it is set aside
  with one warning, as the trace's reader sets aside a torn line, and the story reads as it
  was before that write.

Bad input is one located line: file, line number and, where it has one, the record's id.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from garden._files import open_regular
from garden._notice import warn
from garden.errors import GardenError
from garden.text import shown

SUFFIX = ".jsonl"
MAX_LINE_BYTES = 1024 * 1024  # one record; the largest hand-written record is under 2 KB
MAX_DEPTH = 64                # as the YAML reader's bound


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    """A key written twice is refused, as the YAML reader refuses it: JSON parsers keep the
    last value silently, which hides a mistake."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Duplicate(f"key {shown(key)} is written twice in one object")
    return out


def _depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:  # breadth-first: no recursion for a hostile nesting to exhaust
        depth += 1
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ())
                 if isinstance(v, (dict, list))]
    return depth


def _parse(line: bytes, where: str) -> Any:
    try:
        value = json.loads(line, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        raise GardenError(f"{where}: {exc}") from None
    except UnicodeDecodeError:
        raise GardenError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise GardenError(f"{where}: not a JSON line: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise GardenError(f"{where}: nested too deeply to read") from None
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise GardenError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    return value


def read_story_lines(path: Path) -> tuple[dict, str]:
    """The story's data, as `read_yaml` would give it for the same story in YAML, and the
    sha256 of the exact bytes it was read from (the story's content key: hashing the
    validated story again costs as much as reading it, at a hundred thousand records)."""
    fh = open_regular(path)   # a FIFO or a device is refused, never waited on or read
    lines: list[tuple[int, bytes]] = []
    digest = content_digest()
    with fh:
        n = 0
        while line := fh.readline(MAX_LINE_BYTES + 1):  # never more than the bound in memory
            n += 1
            before = digest.copy() if not line.endswith(b"\n") else digest
            digest.update(line)
            if len(line) > MAX_LINE_BYTES:
                raise GardenError(f"{path}:{n}: line is longer than {MAX_LINE_BYTES:,} bytes, the bound "
                                  "of one story line")
            if line.strip():
                lines.append((n, line))
    if len(lines) > 1 and not lines[-1][1].endswith(b"\n") and _torn(lines[-1][1]):
        # a writer killed mid-line (garden.formats.story_writer): a write never answered
        warn(f"{path}:{lines[-1][0]}: a torn last line ({len(lines[-1][1]):,} bytes, no newline, not JSON) "
             "set aside")
        lines.pop()
        digest = before
    if not lines:
        raise GardenError(f"{path}: empty; a story's first line is its header")
    values = _parse_all(path, lines)
    header = values[0]
    if not isinstance(header, dict) or "records" in header:
        raise GardenError(f"{path}:{lines[0][0]}: the first line is the story's header, a JSON object "
                          f"without records (value {shown(header)})")
    return {**header, "records": values[1:]}, digest.hexdigest()


def content_digest(data: bytes = b""):
    """The running sha256 a story's content key is, over the bytes read so far (`data`)."""
    digest = hashlib.sha256(b"garden story, json lines\n")
    digest.update(data)
    return digest


def _torn(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return True
    return False


def _parse_all(path: Path, lines: list[tuple[int, bytes]]) -> list:
    """Every line's value. The fast path decodes all lines in one call; only when that
    fails, or a line is bracket-heavy enough to be deep, is each line read on its own, so
    the error names its line."""
    if not any(line.count(b"[") + line.count(b"{") > MAX_DEPTH for _, line in lines):
        try:
            values = json.loads(b"[" + b",".join(line for _, line in lines) + b"]", object_pairs_hook=_no_duplicates)
            if len(values) == len(lines):  # a line holding two values would shift the count
                return values
        except (ValueError, RecursionError):
            pass
    return [_parse(line, f"{path}:{n}") for n, line in lines]
