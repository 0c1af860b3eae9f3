"""What a story's retrieval needs, built once: retrievers and the phrase index.

An `IndexCache` holds them in memory, keyed by the story's content (so an edited story is
rebuilt) and, for retrievers, by the garden home (a retriever built against one home's
embedding cache must not stand in for another's). It keeps at most `bound` entries,
dropping the least recently used. `PROCESS_INDEXES` is the one the command line and the
API share for a process. Control records are never indexed: they are stored and validated,
never candidates.

Indexes are also saved under the garden home (`index/`, garden/derived/saves.py), content-addressed: the file's
name carries a hash of the story's content, the retriever's name with its options, the
source of the code that built it (`index_code`: the modules defining the retriever's
class, its members' and their bases, or the phrase index's, as a whole-store table is keyed
by its fold's module, garden/derived/tables.py), the save format and the versions of the
libraries that computed the saved numbers. A second process on an unchanged story loads
them instead of building; anything changed gives another name, so a stale index is never
read: after a change to a retriever's `index()`, whatever the package's version says. A
save is written to a temporary file in the same folder and renamed into place: a crash or
a concurrent build never leaves a torn index, and the previous one stays readable until
the new one is complete. Older saves of the same story and retriever are removed once the
new one is in place.

A save is data, never code: arrays and a JSON header (`garden._state`), read with pickle
refused. Its header names its kind and type, and every array is checked as it is read; a
file that does not load, or holds another kind of index, is removed with one warning and
rebuilt. Only a file this user owns and no one else can read or write is read at all (the
garden writes its saves 0600 in an owner-only folder, `garden doctor` checks both); a file
that is a link is refused. A retriever saves what its `state()` gives (None: not saved); one
that keeps part of its state elsewhere (`dense`'s embeddings live in their own cache) leaves
it out and takes it back in `load_state`.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

from garden._bulk import collector_paused
from garden._state import State
from garden.derived.home import derived_dir
from garden.derived.saves import (COUNTS, SAVE_FORMAT, SUFFIX, load_saved, save, save_path,  # noqa: F401
                                  story_key)
from garden.derived.tables import code_key
from garden.models import Story
from garden.rerank.phrase import PhraseIndex
from garden.rerank.timeline import record_fields
from garden.retrievers import Doc, ProcessCache, Retriever, documents, make_retriever


def doc_ids(docs: Sequence[Doc]) -> list[str]:
    """The documents' ids; a saved story's documents give theirs without making each one."""
    return docs.ids if hasattr(docs, "ids") else [d.id for d in docs]


def index_code(*classes: type) -> str:
    """`code_key` of the modules that define `classes` and their bases (those read from a
    file): an index built by other code is saved under another name."""
    modules = sorted({c.__module__ for cls in classes for c in cls.__mro__
                      if getattr(sys.modules.get(c.__module__), "__file__", None)})
    return code_key(*modules)


def _builders(kind: str) -> tuple[type, ...]:
    """The classes whose code builds the index of `kind` ("phrase", "retriever:SPEC")."""
    if kind == "phrase":
        return (PhraseIndex,)
    retriever = make_retriever(kind.split(":", 1)[1])
    return tuple(type(m) for m in (retriever, *retriever.members().values()))


def saved_path(story: Story, kind: str, builders: tuple[type, ...] | None = None) -> Path:
    """Where the index of `kind` for this story's content, built by the code of `builders`
    (the classes that build it; found from `kind` when not given), is saved."""
    code = index_code(*(builders or _builders(kind)))
    return save_path(story.name, kind, f"{story_key(story)}:{code}")


class IndexCache:
    def __init__(self, bound: int = 64, read_saved: bool = True):
        self._entries: ProcessCache = ProcessCache(bound)
        self.read_saved = read_saved  # False: build afresh (and save) rather than load a save

    def _saved_or_built(self, story: Story, kind: str, type_name: str, build, load, state_of,
                        builders: tuple[type, ...]):
        """The index of `kind` built by the code of `builders`: `load(state)` of its save
        when there is a good one, else `build()`, then saved as `state_of(index)` gives it."""
        with collector_paused():  # see garden._bulk: an index is a few hundred thousand objects
            path = saved_path(story, kind, builders)
            if self.read_saved:
                value = load_saved(path, kind, type_name, load)
                if value is not None:
                    COUNTS[f"{kind}:loaded"] += 1
                    return value
            value = build()
            COUNTS[f"{kind}:built"] += 1
            save(path, lambda: state_of(value), story.name, kind, type_name)
            return value

    def retriever(self, story: Story, name: str) -> Retriever:
        def make():
            attached = story.attached(make_retriever(name), name)
            if attached is not None:   # its records live elsewhere (Milvus): the index built there
                return attached
            docs = documents(story)
            retriever = make_retriever(name)

            def build():
                if retriever.pushes_down:   # the fields of the records it indexes
                    retriever.describe_records({d.id: record_fields(story.by_id[d.id], story) for d in docs})
                retriever.index(docs)
                return retriever

            def load(state: State):
                retriever.load_state(state, docs)
                return retriever

            if not retriever.persist:
                return build()
            return self._saved_or_built(story, f"retriever:{name}", type(retriever).__qualname__, build, load,
                                        lambda r: r.state(),
                                        tuple(type(m) for m in (retriever, *retriever.members().values())))

        return self._entries.get(("retriever", story_key(story), name, str(derived_dir())), make)

    def phrase_index(self, story: Story) -> PhraseIndex:
        def make():
            saved = story.saved_phrase_index()
            if saved is not None:   # built where its records live, when it was ingested
                return saved
            docs = documents(story)
            return self._saved_or_built(story, "phrase", "PhraseIndex",
                                        lambda: PhraseIndex({d.id: d.text for d in docs}),
                                        lambda state: PhraseIndex.from_state(
                                            state, docs if hasattr(docs, "encoded_ids") else doc_ids(docs)),
                                        lambda index: index.state(), (PhraseIndex,))

        return self._entries.get(("phrase", story_key(story), str(derived_dir())), make)

    def clear(self) -> None:
        self._entries.clear()

    def drop_story(self, key: str) -> int:
        """Forget what was built for the story whose content key is `key` (a version of a
        story that has been replaced); how many indexes were dropped."""
        return self._entries.drop(lambda entry: entry[1] == key)

    def __len__(self) -> int:
        return len(self._entries)


PROCESS_INDEXES = IndexCache()


@contextmanager
def fresh_builds():
    """PROCESS_INDEXES builds every index afresh (and saves it) inside this block, reading
    neither memory nor a save: each of a promotion's runs must build its own."""
    PROCESS_INDEXES.clear()
    before, PROCESS_INDEXES.read_saved = PROCESS_INDEXES.read_saved, False
    try:
        yield
    finally:
        PROCESS_INDEXES.read_saved = before
