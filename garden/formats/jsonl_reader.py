"""Stories as JSON Lines: the machine-written form of a story, for stores too large for YAML.

Line 1 is the story's header (every field but `records`: story, project, topics, entities
and the rest); every later line is one record. The data is exactly a YAML story's, so
validation is the same; only the reading differs:

- JSON is parsed by the C decoder, about a hundred times faster than the pure-Python YAML
  reader the hand-written stories need for their located errors and hostile-input bounds;
- a writer can stream a story of any size record by record (`garden generate`);
- a line is bounded (`MAX_LINE_BYTES`), not the file: one record cannot be a gigabyte, and
  a hundred thousand records read in seconds.

Bad input is one located line: file, line number and, where it has one, the record's id.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from garden.errors import GardenError
from garden.text import shown

SUFFIX = ".jsonl"
MAX_LINE_BYTES = 1024 * 1024  # one record; the largest hand-written record is under 2 KB
MAX_DEPTH = 64                # as the YAML reader's bound


def _depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:  # breadth-first: no recursion for a hostile nesting to exhaust
        depth += 1
        level = [v for x in level for v in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ())
                 if isinstance(v, (dict, list))]
    return depth


def _parse(line: bytes, where: str) -> Any:
    try:
        value = json.loads(line)
    except UnicodeDecodeError:
        raise GardenError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise GardenError(f"{where}: not a JSON line: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise GardenError(f"{where}: nested too deeply to read") from None
    if _depth(value) > MAX_DEPTH:
        raise GardenError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    return value


def read_story_lines(path: Path) -> dict:
    """The story's data, as `read_yaml` would give it for the same story in YAML."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise GardenError(f"{path}: no such file") from None
    except OSError as exc:
        raise GardenError(f"{path}: cannot read: {exc.strerror or exc}") from None
    header: Any = None
    records: list = []
    with fh:
        n = 0
        while line := fh.readline(MAX_LINE_BYTES + 1):  # never more than the bound in memory
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise GardenError(f"{path}:{n}: line is longer than {MAX_LINE_BYTES:,} bytes, the bound "
                                  "of one story line")
            if not line.strip():
                continue
            value = _parse(line, f"{path}:{n}")
            if header is None:
                if not isinstance(value, dict) or "records" in value:
                    raise GardenError(f"{path}:{n}: the first line is the story's header, a JSON object "
                                      "without records (value {})".format(shown(value)))
                header = value
            else:
                records.append(value)
    if header is None:
        raise GardenError(f"{path}: empty; a story's first line is its header")
    return {**header, "records": records}
