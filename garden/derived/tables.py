"""Whole-store tables, one registry: each made by one fold over the records, saved beside the indexes.

A stage that reads something of the whole store (the decide stage's vocabulary, the
records beside each record, the notes citing each record, each entity's selectivity, the
story's speakers, its sessions, what its reference draws from) reads a `Table` registered
here (`table(name, fold, codec)`): its name, the one fold that makes it from the story's
records (a class made with the story, given each record in the story's order by `add`,
its table from `value()`) and the `Codec` that saves and reads it. The stage says which
it reads (`tables` on its class), so a story ingested into Milvus, whose records are never
all in the process, folds exactly the declared tables as it streams the file and saves
them (garden/store/milvus.py, `TABLES` the one place their names live); a story read from
its file folds its records; a saved story (garden/store/stored.py) folds the records it
reads from its save. A story whose records are elsewhere and which holds no copy of a
table refuses it in one line naming the story and the table, never folding nothing.

Made again in every process, such a table cost about a second at 20,000 records (the
vocabulary analyzes every record). `Table.of(story)` keeps it on the story
(`Story.remembered`) and, the first time a process makes it, saves it under the garden
home (`index/`), in the indexes' safe format:
arrays and JSON (garden/_state.py), every array checked as it is read, only a file this user
owns and no one else can read or write, a damaged, foreign or other user's file removed
with one warning and made again (`garden.derived.saves.load_saved`). A later process, on
the same content, reads it.

The save's name hashes the story's content key (`story_key`: a changed story is another
name), the table's name, the source of the module that makes it (`code_key`: a changed rule
is another name too, whatever the package's version says) and the libraries' versions. A
`Codec` says how a table becomes a `State` and back; its `load` checks what it reads, as an
index's `load_state` does.

`in_memory()` turns every save off for a block (nothing read, nothing written): what a test
compares the saved path against.
"""
from __future__ import annotations

import hashlib
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from garden._bulk import collector_paused
from garden._state import State
from garden.models import Record, Story, folded

USE_SAVES = [True]   # a list, so `in_memory` can turn it off for a block


@dataclass(frozen=True)
class Codec:
    """How one table is saved: `save(value) -> State` and `load(state) -> value`, the
    latter raising ValueError (or KeyError, TypeError, IndexError) on a state it cannot use."""

    save: Callable[[Any], State]
    load: Callable[[State], Any]


_CODE: dict[str, str] = {}


def code_key(*modules: str) -> str:
    """sha256 of the named modules' source files (read once per process): a save made by
    other code is never read as this code's."""
    key = ",".join(modules)
    if key not in _CODE:
        h = hashlib.sha256()
        for name in modules:
            h.update(name.encode())
            h.update(Path(sys.modules[name].__file__).read_bytes())
        _CODE[key] = h.hexdigest()
    return _CODE[key]


@dataclass(frozen=True)
class Table:
    """One whole-store table: its `name` (the one a story keeps it under), the `fold` that
    makes it (`fold(story)`, then `add(record)` for every record in the story's order,
    then `value()`) and the `codec` that saves and reads it."""

    name: str
    fold: Callable[[Story], Any]
    codec: Codec

    def build(self, story: Story) -> Any:
        """The table folded over the story's records."""
        return folded(story, self.fold)

    def of(self, story: Story) -> Any:
        """The story's table: kept on it, read from its save when there is a good one, else
        built and saved (see the module docstring)."""
        return story.remembered(self.name, lambda s: _saved_or_built(s, self.name, self.build, self.codec,
                                                                     self.fold.__module__))


TABLES: dict[str, Table] = {}   # name -> table: every table a stage may read


def table(name: str, fold: Callable[[Story], Any], codec: Codec) -> Table:
    """Register the table `name` (a second table of one name is refused: two rules would
    share one save)."""
    known = TABLES.get(name)
    if known is not None and known.fold is not fold:
        raise ValueError(f"table {name!r} is registered twice ({known.fold.__module__} and {fold.__module__})")
    TABLES[name] = made = Table(name, fold, codec)
    return made


def fold_all(story: Story, records: Iterable[Record], tables: Iterable[Table]) -> dict[str, Any]:
    """Each of `tables` folded over `records` in one pass (`story` gives the header: its
    entities, its dates): a story ingested into Milvus streams its file through here."""
    folds = {t.name: t.fold(story) for t in tables}
    adds = [f.add for f in folds.values()]
    for record in records:
        for add in adds:
            add(record)
    return {name: f.value() for name, f in folds.items()}


def remembered(story: Story, name: str, build: Callable[[Story], Any], codec: Codec):
    """`story.remembered(name, build)`, read from its save when there is a good one, else
    built and saved: what is made of a story by other means than folding its records (the
    store's reference, made by running queries)."""
    return story.remembered(name, lambda s: _saved_or_built(s, name, build, codec, build.__module__))


def _saved_or_built(story: Story, name: str, build, codec: Codec, module: str):
    if not USE_SAVES[0]:
        return build(story)
    from garden.derived.saves import COUNTS, load_saved, save, save_path, story_key

    kind = f"table:{name}"
    path = save_path(story.name, kind, f"{story_key(story)}:{code_key(module)}")
    with collector_paused():
        value = load_saved(path, kind, "table", codec.load)
        if value is not None:
            COUNTS[f"{kind}:loaded"] += 1
            return value
        value = build(story)
        COUNTS[f"{kind}:built"] += 1
        save(path, lambda: codec.save(value), story.name, kind, "table")
    return value


@contextmanager
def in_memory():
    """Inside this block no table or story save is read or written: everything is made
    from the story's records, as before saves existed."""
    before, USE_SAVES[0] = USE_SAVES[0], False
    try:
        yield
    finally:
        USE_SAVES[0] = before


# --- codecs of the common shapes --------------------------------------------------


def groups_codec() -> Codec:
    """A mapping of a string to a tuple of strings (record id -> ids), as offsets into one
    list of ids."""

    def save(value: dict[str, tuple[str, ...]]) -> State:
        state = State(meta={"n": len(value)})
        state.put_strings("keys", list(value))
        state.put_strings("members", [m for members in value.values() for m in members])
        starts = [0]
        for members in value.values():
            starts.append(starts[-1] + len(members))
        state.put("starts", np.array(starts, dtype=np.int64))
        return state

    def load(state: State) -> dict[str, tuple[str, ...]]:
        keys = state.strings("keys")
        members = state.strings("members")
        starts = state.positions("starts", len(members) + 1, len(keys) + 1).tolist()
        if starts[0] != 0 or starts[-1] != len(members) or any(b < a for a, b in zip(starts, starts[1:])):
            raise ValueError("array 'starts' does not cut the members into groups")
        return {k: tuple(members[a:b]) for k, a, b in zip(keys, starts, starts[1:])}

    return Codec(save, load)


def numbers_codec(kind: str = "f") -> Codec:
    """A mapping of a string to a number (float64 for "f", int64 for "i")."""
    dtype = np.float64 if kind == "f" else np.int64

    def save(value: dict[str, float]) -> State:
        state = State()
        state.put_strings("keys", list(value))
        state.put("values", np.array(list(value.values()), dtype=dtype))
        return state

    def load(state: State) -> dict:
        keys = state.strings("keys")
        return dict(zip(keys, state.array("values", kind, 1, len(keys)).tolist()))

    return Codec(save, load)


def lists_codec() -> Codec:
    """A list of lists of strings, as groups keyed by position."""
    groups = groups_codec()
    return Codec(lambda value: groups.save({str(n): tuple(names) for n, names in enumerate(value)}),
                 lambda state: [list(names) for names in groups.load(state).values()])


def ids_codec() -> Codec:
    """A tuple of strings, in its order."""

    def save(value: tuple[str, ...]) -> State:
        state = State()
        state.put_strings("items", list(value))
        return state

    return Codec(save, lambda state: tuple(state.strings("items")))


def strings_codec() -> Codec:
    """A frozenset of strings, saved sorted."""

    def save(value: frozenset[str]) -> State:
        state = State()
        state.put_strings("items", sorted(value))
        return state

    return Codec(save, lambda state: frozenset(state.strings("items")))
