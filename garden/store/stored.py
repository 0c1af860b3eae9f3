"""A story as parsed and validated, saved: a second process reads the save, not the file.

Reading a story file parses every line and validates every record against every rule of
the story format, which at 20,000 records took 1.4 s of a one-question process. The first
process to read a story file with `open_story` does that (`load_story`) and saves the
result under the garden home (`index/`); a later process whose file holds the same bytes
reads the save, and only what its query asks of it:

- the header (the story's fields other than its records, its content key and its latest
  date) at once;
- each record when first asked for (`story.records[n]`, `story.by_id[id]`), from the JSON
  of its validated fields (`Record.model_validate_json`): a query makes the records it
  touches, not the hundred thousand it does not;
- the story's tables that `Story` keeps (ids, kinds, body sizes, the records holding each
  topic and entity, the documents the indexes read) when first asked for.

Which save: its name hashes the sha256 of the file's exact bytes, the file's name (a
story's name must equal its file stem), the source of the modules that read and check a
story (`CODE`: a changed rule is another name, whatever the package's version says), the
save format and the libraries' versions. The key is the content, not a cheap identity such as
size and modification time: an edit that keeps both (a copy that preserves times, a clock
set back, a file system with coarse times) would then serve a stale story. Hashing costs
one read of the file (about 0.05 s at 100,000 records); a stale answer costs more. The file
is hashed before it is read and again after; when the two differ (it was being written) no
save is made. Attachments live outside the story file, so a story whose records carry any
checks them again every time its save is read (`garden.formats.attachments`); a problem there
reads the file instead, which reports it.

A save is arrays and JSON (garden/_state.py), read lazily: each array is checked against its
sha256 when first read. It is read only when this user owns it and no one else can read or
write it; a damaged, foreign or other user's save is removed with one warning and the file
read again (`garden.derived.saves.load_saved`). `garden.derived.tables.in_memory()` turns
saves off: the story is read from its file, as `load_story` reads it.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import get_args

import numpy as np

from garden._bulk import collector_paused
from garden._files import open_regular
from garden._state import State
from garden.derived.tables import USE_SAVES, code_key
from garden.models import Kind, Record, Story
from garden.retrievers import Doc
from garden.retrievers._scores import id_order, shared_doc_ids

KIND = "story"
TYPE = "Story"
KINDS = get_args(Kind)
# the modules whose code decides what a story file reads as
# stories this process opened, by file and save: a notebook or a server asking again gets the
# same story, with the tables it already read (the file is hashed again every time)
OPENED: dict[tuple[str, str], Story] = {}
OPENED_LIMIT = 8
CODE = ("garden.models", "garden.formats.stories", "garden.formats.jsonl_reader", "garden.formats.yaml_reader",
        "garden.formats.attachments", "garden.text", __name__)


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes, read through `open_regular` (a FIFO is refused)."""
    with open_regular(path) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def open_story(path: str | Path) -> Story:
    """The story in the file at `path`, as `load_story` gives it (StoryError listing every
    problem of a story that breaks a rule): from its save when one holds the file's bytes,
    else read, validated and saved (see the module docstring)."""
    from garden.derived.saves import COUNTS, load_saved, save, save_path
    from garden.formats.stories import load_story

    path = Path(path)
    if not USE_SAVES[0]:
        return load_story(path)
    before = file_digest(path)
    key = json.dumps([before, path.name, code_key(*CODE)])
    target = save_path(path.stem, KIND, key)
    opened = (str(path.resolve()), str(target))
    known = OPENED.get(opened)
    if known is not None and _attachments_hold(known, path):
        return known   # this process read it already: its tables are on it
    with collector_paused():
        story = load_saved(target, KIND, TYPE, lambda state: _from_state(state, path), lazy=True)
    if story is not None and _attachments_hold(story, path):
        COUNTS[f"{KIND}:loaded"] += 1
    else:
        story = load_story(path)
        COUNTS[f"{KIND}:built"] += 1
        story.__dict__["_attached"] = [n for n, r in enumerate(story.records) if r.attachments]
        if file_digest(path) == before:   # not written to while it was read
            save(target, lambda: story_state(story), path.stem, KIND, TYPE)
    OPENED[opened] = story
    while len(OPENED) > OPENED_LIMIT:
        OPENED.pop(next(iter(OPENED)))
    return story


def _attachments_hold(story: Story, path: Path) -> bool:
    from garden.formats.attachments import check_attachment

    rows = story.__dict__["_attached"]
    return not any(check_attachment(path.parent, a).problem for n in rows for a in story.records[n].attachments)


# --- the save ---------------------------------------------------------------------


def story_state(story: Story) -> State:
    """What a validated story keeps in its save."""
    from garden.derived.saves import story_key
    from garden.retrievers import documents

    records = story.records
    latest = story.latest
    header = story.model_dump(mode="json", exclude={"records"}, exclude_unset=True)
    state = State(meta={"header": header, "key": story_key(story), "records": len(records),
                        "latest": latest.isoformat() if latest else None})
    state.put_rows("records", [r.model_dump_json(exclude_unset=True).encode("utf-8") for r in records])
    state.put("ids", np.frombuffer("\n".join(r.id for r in records).encode("utf-8"), dtype=np.uint8))
    state.put("kinds", np.array([KINDS.index(r.kind) for r in records], dtype=np.uint8))
    sizes = story.sizes
    state.put("sizes", np.array([sizes[r.id] for r in records], dtype=np.int64))
    row = {r.id: n for n, r in enumerate(records)}
    docs = documents(story)
    state.put("documents", np.array([row[d.id] for d in docs], dtype=np.int64))
    state.put_strings("texts", [d.text for d in docs])
    state.put_strings("documents.ids", [d.id for d in docs])   # as an index saves them: compared whole
    state.put("documents.order", id_order([d.id for d in docs]))
    state.put("attached", np.array([n for n, r in enumerate(records) if r.attachments], dtype=np.int64))
    for field in ("topics", "entities"):
        holders = story.holders(field)
        state.put_strings(f"{field}.names", list(holders))
        state.put(f"{field}.starts", np.cumsum([0] + [len(ids) for ids in holders.values()], dtype=np.int64))
        state.put(f"{field}.rows", np.array([row[i] for ids in holders.values() for i in ids], dtype=np.int64))
    return state


def _from_state(state: State, path: Path) -> Story:
    """The story a save holds: its header now, the rest when first asked for."""
    meta = state.meta
    header = meta.get("header")
    n = int(state.number("records", 0))
    if not isinstance(header, dict) or "records" in header or not isinstance(meta.get("key"), str):
        raise ValueError("its header is not a story's")
    story = SavedStory.model_validate({**header, "records": []})
    if story.name != path.stem:
        raise ValueError(f"it holds story {story.name!r}, not {path.stem!r}")
    saved = SavedTables(state, n)
    story.__dict__["records"] = saved.records
    latest = meta.get("latest")
    story.__dict__.update(_key=meta["key"], _saved=saved.read, _attached=saved.attached(),
                          _latest_date=dt.date.fromisoformat(latest) if latest else False)
    return story


class SavedStory(Story):
    """A story read from its save: a `Story` whose records are made when first asked for.
    What needs every record as data (dumping it, copying it) makes them all first."""

    def _every_record(self) -> None:
        if isinstance(self.__dict__.get("records"), LazyRecords):
            self.__dict__["records"] = list(self.__dict__["records"])

    def model_dump(self, **kwargs):
        self._every_record()
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs):
        self._every_record()
        return super().model_dump_json(**kwargs)

    def model_copy(self, **kwargs):
        self._every_record()
        return super().model_copy(**kwargs)


class SavedTables:
    """A story save's arrays, read when first asked for (`read`: what `Story.remembered`
    calls for a name it does not yet hold)."""

    def __init__(self, state: State, n: int):
        self.state, self.n = state, n
        self.records = LazyRecords(state, n)

    def attached(self) -> list[int]:
        return self.state.positions("attached", self.n).tolist()

    def ids(self) -> list[str]:
        found = self.__dict__.get("_ids")
        if found is None:
            blob = self.state.array("ids", "u").tobytes().decode("utf-8")
            found = self._ids = blob.split("\n") if self.n else []
            if len(found) != self.n:
                raise ValueError("array 'ids' does not hold one id a record")
        return found

    def rows(self) -> dict[str, int]:
        found = self.__dict__.get("_rows")
        if found is None:
            found = self._rows = {rid: n for n, rid in enumerate(self.ids())}
        return found

    def read(self, name: str, story: Story, build):
        maker = getattr(self, f"_{name}", None)
        return build(story) if maker is None else maker()

    def _record_order(self) -> Mapping[str, int]:
        return self.rows()

    def _by_id(self) -> Mapping[str, Record]:
        return ByRow(self.rows(), self.records.__getitem__)

    def _kinds(self) -> Mapping[str, str]:
        codes = self.state.positions("kinds", len(KINDS), self.n)
        return ByRow(self.rows(), lambda row: KINDS[codes[row]])

    def _sizes(self) -> Mapping[str, int]:
        sizes = self.state.array("sizes", "i", 1, self.n)
        if len(sizes) and int(sizes.min()) < 0:
            raise ValueError("array 'sizes' holds a negative size")
        return ByRow(self.rows(), lambda row: int(sizes[row]))

    def _documents(self) -> SavedDocuments:
        rows = self.state.positions("documents", self.n).tolist()
        ids = self.ids()
        return SavedDocuments([ids[r] for r in rows], self.state, self.rows, rows, self.n)

    def _holders(self, field: str) -> dict[str, tuple[str, ...]]:
        names = self.state.strings(f"{field}.names")
        rows = self.state.positions(f"{field}.rows", self.n).tolist()
        starts = self.state.positions(f"{field}.starts", len(rows) + 1, len(names) + 1).tolist()
        if starts and (starts[0] != 0 or starts[-1] != len(rows)):
            raise ValueError(f"array '{field}.starts' does not cut the rows into holders")
        ids = self.ids()
        return {name: tuple(ids[r] for r in rows[a:b]) for name, a, b in zip(names, starts, starts[1:])}

    def _holders_topics(self):
        return self._holders("topics")

    def _holders_entities(self):
        return self._holders("entities")


class SavedDocuments(Sequence):
    """What the indexes of a saved story index (`garden.retrievers.documents`): the
    ids at once (`ids`, what loading a saved index checks), the texts when a document is
    first asked for (what building one reads)."""

    def __init__(self, ids: list[str], state: State, story_rows, rows: list[int], records: int):
        self.ids, self._state = ids, state
        self._docs: tuple[Doc, ...] | None = None
        share_doc_ids(ids, state.positions("documents.order", len(ids), len(ids)), story_rows, rows, records)

    def encoded_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids as an index's save holds them (`State.put_strings`)."""
        return self._state.array("documents.ids.utf8", "u"), self._state.array("documents.ids.offsets", "i")

    def _all(self) -> tuple[Doc, ...]:
        if self._docs is None:
            texts = self._state.strings("texts", len(self.ids))
            self._docs = tuple(Doc(i, t) for i, t in zip(self.ids, texts))
        return self._docs

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, n):
        return self._all()[n]

    def __iter__(self):
        return iter(self._all())


def share_doc_ids(ids: list[str], order, story_rows, rows, records: int) -> None:
    """Make `ids` (the documents' ids, tie-broken by `order`) the list the indexes loaded on
    them share, with each id's position among the documents read through the story's own id
    -> row map (`story_rows`, called when first read; `rows` the documents' rows among the
    story's `records`) rather than made again for every document (0.1 s at 100,000
    records)."""
    shared = shared_doc_ids(ids, order)
    place = np.full(records, -1, dtype=np.int64)
    place[rows] = np.arange(len(rows))
    shared.__dict__["positions"] = DocPositions(story_rows, place, ids)


class DocPositions(Mapping):
    """A document's id -> its position among the documents (`DocIds.positions`), through the
    story's id -> row map; a record that is no document (a control record) is not in it."""

    def __init__(self, story_rows, place: np.ndarray, ids: list[str]):
        self._story_rows, self._place, self._ids = story_rows, place, ids

    def __getitem__(self, rid: str) -> int:
        at = int(self._place[self._story_rows()[rid]])
        if at < 0:
            raise KeyError(rid)
        return at

    def __contains__(self, rid) -> bool:
        row = self._story_rows().get(rid)
        return row is not None and self._place[row] >= 0

    def __iter__(self):
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


class LazyRecords(Sequence):
    """A saved story's records, each made (and checked, as the story format checks it) the
    first time it is asked for."""

    def __init__(self, state: State, n: int):
        self._state, self._n = state, n
        self._made: list[Record | None] = [None] * n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, n):
        if isinstance(n, slice):
            return [self[i] for i in range(*n.indices(self._n))]
        if not isinstance(n, int) or not -self._n <= n < self._n:
            raise IndexError(f"record {n!r} of {self._n}")
        n %= self._n
        record = self._made[n]
        if record is None:
            record = self._made[n] = Record.model_validate_json(self._state.row("records", n, self._n))
        return record

    def __iter__(self):
        return (self[n] for n in range(self._n))


class ByRow(Mapping):
    """id -> what `value(row)` gives for the id's row: a table read from arrays, by id."""

    def __init__(self, rows: dict[str, int], value):
        self._rows, self._value = rows, value

    def __getitem__(self, rid: str):
        return self._value(self._rows[rid])

    def __contains__(self, rid) -> bool:
        return rid in self._rows

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
