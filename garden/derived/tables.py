"""Whole-store tables, saved beside the indexes: made once per story's content, not per process.

A stage that reads something of the whole store (the decide stage's vocabulary, the
records beside each record, the notes citing each record, each entity's selectivity, the
story's speakers) makes it once per story (`Story.remembered`). Made again in every process,
such a table cost about a second at 20,000 records (the vocabulary analyzes every record).
`remembered(story, name, build, codec)` keeps it on the story as before and, the first time
a process makes it, saves it under the garden home (`index/`), in the indexes' safe format:
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
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from garden._bulk import collector_paused
from garden._state import State

if TYPE_CHECKING:  # the stages that import this module are imported by garden.models itself
    from garden.models import Story

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


def remembered(story: Story, name: str, build: Callable[[Story], Any], codec: Codec):
    """`story.remembered(name, build)`, read from its save when there is a good one, else
    built and saved (see the module docstring)."""
    return story.remembered(name, lambda s: _saved_or_built(s, name, build, codec))


def _saved_or_built(story: Story, name: str, build, codec: Codec):
    if not USE_SAVES[0]:
        return build(story)
    from garden.derived.saves import COUNTS, load_saved, save, save_path, story_key

    kind = f"table:{name}"
    path = save_path(story.story, kind, f"{story_key(story)}:{code_key(build.__module__)}")
    with collector_paused():
        value = load_saved(path, kind, "table", codec.load)
        if value is not None:
            COUNTS[f"{kind}:loaded"] += 1
            return value
        value = build(story)
        COUNTS[f"{kind}:built"] += 1
        save(path, lambda: codec.save(value), story.story, kind, "table")
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


def strings_codec() -> Codec:
    """A frozenset of strings, saved sorted."""

    def save(value: frozenset[str]) -> State:
        state = State()
        state.put_strings("items", sorted(value))
        return state

    return Codec(save, lambda state: frozenset(state.strings("items")))
