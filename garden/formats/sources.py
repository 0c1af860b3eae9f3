"""What a source given to `compare` or `ablate` is, by explicit markers, never by which
reader happens to be tried first.

Each kind has markers of its own, and a path is the one kind whose markers it carries:

- `trace`: a `.jsonl` file, or a folder holding `trace-YYYY-MM-DD.jsonl` files (the
  garden home's `traces/`);
- `longmemeval`: a `.json` or `.json.gz` file named `longmemeval`, gzipped, or with
  LongMemEval's keys; or the folder `garden import longmemeval` wrote
  (`fixtures/longmemeval-*` beside `cases/`);
- `locomo`: any other `.json` file (LoCoMo is the one plain-JSON source left), a folder
  holding `.json` files, or the folder `garden import locomo` wrote;
- `collection`: a folder holding `corpus.jsonl` (BEIR) or `corpus/` (TREC);
- `cases`: a `.yaml` or `.yml` file, or a folder holding case files that is not an
  imported store set (whose cases are read with their stores).

A folder that carries the markers of two kinds (a BEIR collection with a stray `.json`
file, a folder of traces that also holds a collection) is refused in one line naming both,
so the user decides which it is; a path with no marker is refused naming what each kind
needs. A kind registered beside these (garden/evaluation/kinds) brings its own marker,
which `source_kind` is given and holds to the same rules.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from garden.pipelines.traces import TRACE_NAME
from garden.errors import GardenError
from garden.formats.layout import CASES_FOLDER, STORY_FOLDER

KINDS = ("trace", "longmemeval", "locomo", "collection", "cases")
NEEDS = ("a trace (.jsonl, or a folder of trace-YYYY-MM-DD.jsonl files), LongMemEval or LoCoMo (.json, or the "
         "folder `garden import` wrote), a collection folder (corpus.jsonl or corpus/), or cases (.yaml files)")


def _imported(path: Path, prefix: str) -> bool:
    return any((path / STORY_FOLDER).glob(f"{prefix}-*")) and (path / CASES_FOLDER).is_dir()


def looks_like_longmemeval_file(path: Path) -> bool:
    """A file named so, gzipped JSON, or JSON whose first records carry LongMemEval's keys."""
    if not path.is_file():
        return False
    name = path.name.lower()
    if "longmemeval" in name or name.endswith(".json.gz"):
        return True
    if not name.endswith(".json"):
        return False
    from garden.formats.json_stream import open_text

    try:
        with open_text(path) as fh:
            head = fh.read(1 << 16)
    except (GardenError, OSError, UnicodeDecodeError, EOFError):
        return False
    return '"question_id"' in head or '"haystack_session_ids"' in head


def markers(path: Path) -> dict[str, str]:
    """Each kind whose markers `path` carries, with the marker found."""
    found: dict[str, str] = {}
    if path.exists() and not path.is_dir():  # a FIFO or a device too: its reader refuses it by name
        name = path.name.lower()
        if name.endswith(".jsonl"):
            found["trace"] = "a .jsonl file"
        elif name.endswith((".json", ".json.gz")):
            if looks_like_longmemeval_file(path):
                found["longmemeval"] = "a LongMemEval file (its name or keys)"
            elif name.endswith(".json"):
                found["locomo"] = "a .json file"
        elif name.endswith((".yaml", ".yml")):
            found["cases"] = "a .yaml file"
        return found
    if not path.is_dir():
        return found
    if any(TRACE_NAME.fullmatch(p.name) and p.is_file() for p in path.iterdir()):
        found["trace"] = "trace-YYYY-MM-DD.jsonl files"
    if _imported(path, "longmemeval"):
        found["longmemeval"] = f"{STORY_FOLDER}/longmemeval-* beside {CASES_FOLDER}/"
    if _imported(path, "locomo"):
        found["locomo"] = f"{STORY_FOLDER}/locomo-*.yaml beside {CASES_FOLDER}/"
    elif any(p.is_file() for p in path.glob("*.json")):
        found["locomo"] = ".json files"
    if (path / "corpus.jsonl").is_file():
        found["collection"] = "corpus.jsonl (BEIR)"
    elif (path / "corpus").is_dir():
        found["collection"] = "corpus/ (TREC)"
    if "longmemeval" not in found and "locomo" not in found and any(path.rglob("*.yaml")):
        found["cases"] = ".yaml files"
    return found


def _home_hint(path: Path) -> str:
    """For a `.garden/...` path that is not there while GARDEN_HOME names another home:
    where that home's traces are (the README's `.garden/traces` is the home by default)."""
    from garden.pipelines.traces import trace_dir

    if ".garden" not in path.parts:
        return ""
    traces = trace_dir()
    if traces.resolve() == (Path.cwd() / ".garden" / "traces").resolve():
        return ""
    return f"; GARDEN_HOME is set: the traces are in {traces}"


def source_kind(path: str | Path, more: Mapping[str, Callable[[Path], str | None]] | None = None) -> str:
    """The one kind `path` is; GardenError when it is none, or carries two kinds' markers.
    `more`: kinds registered beside these (garden/evaluation/kinds), each with the function
    that returns the marker a path carries, or None."""
    path = Path(path)
    if not path.exists():
        raise GardenError(f"{path}: no such collection folder, case file or trace file{_home_hint(path)}")
    found = markers(path)
    for kind, marker in (more or {}).items():
        if (why := marker(path)) is not None:
            found[kind] = why
    if not found:
        others = "".join(f", or {kind}" for kind in (more or {}))
        raise GardenError(f"{path}: not a source the garden reads; it needs the markers of {NEEDS}{others}")
    if len(found) > 1:
        both = "; ".join(f"{kind} ({why})" for kind, why in found.items())
        raise GardenError(f"{path}: carries the markers of more than one kind of source: {both}; "
                          "move what does not belong out of the folder")
    return next(iter(found))
