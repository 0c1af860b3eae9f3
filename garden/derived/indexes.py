"""What a story's retrieval needs, built once: retrievers and the phrase index.

An `IndexCache` holds them in memory, keyed by the story's content (so an edited story is
rebuilt) and, for retrievers, by the garden home (a retriever built against one home's
embedding cache must not stand in for another's). It keeps at most `bound` entries,
dropping the least recently used. `PROCESS_INDEXES` is the one the command line and the
API share for a process. Control records are never indexed: they are stored and validated,
never candidates.

Indexes are also saved under the garden home (`index/`), content-addressed: the file's
name carries a hash of the story's content, the retriever's name with its options, the
save format and the versions of the libraries that computed the saved numbers. A second
process on an unchanged story loads them instead of building; anything changed gives
another name, so a stale index is never read. A save is written to a temporary file in the
same folder and renamed into place: a crash or a concurrent build never leaves a torn
index, and the previous one stays readable until the new one is complete. Older saves of
the same story and retriever are removed once the new one is in place.

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

import hashlib
import json
import os
import re
import stat
import sys
from collections import Counter
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Sequence

from garden._bulk import collector_paused
from garden._state import State, WrongIndex, read_state, write_state
from garden._notice import warn
from garden.derived.home import derived_dir, derived_folder, distrust, refuse_link, remove_orphans, write_whole
from garden.models import Story
from garden.rerank.phrase import PhraseIndex
from garden.rerank.timeline import record_fields
from garden.retrievers import Doc, ProcessCache, Retriever, documents, make_retriever

# 6: arrays aligned in the file (mapped, not copied); 5: dense keeps its matrix; 4: arrays
# and JSON (garden._state); 3 and before: pickles
SAVE_FORMAT = 6
# the libraries that compute what a saved index holds: a new version of any may compute
# other numbers, so it gives the index another name
SAVED_WITH = ("pinecone-garden", "numpy", "scipy", "bm25s", "rank-bm25", "scikit-learn")
SUFFIX = ".npz"
OLD_SUFFIXES = (".pkl",)  # saves of earlier formats, removed when a save replaces them

# what this process did, by kind ("retriever:bm25", "phrase"): built, loaded from a save
COUNTS: Counter = Counter()


def story_key(story: Story) -> str:
    """sha256 of the story's validated content: the key of everything derived from it."""
    return story.remembered("key", lambda s: hashlib.sha256(
        json.dumps(s.model_dump(mode="json"), sort_keys=True).encode()).hexdigest())


def doc_ids(docs: Sequence[Doc]) -> list[str]:
    """The documents' ids; a saved story's documents give theirs without making each one."""
    return docs.ids if hasattr(docs, "ids") else [d.id for d in docs]


def _versions() -> list[str]:
    out = [sys.version.split()[0]]
    for name in SAVED_WITH:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}==none")
    return out


_VERSIONS: list[str] = []


def saved_path(story: Story, kind: str) -> Path:
    """Where the index of `kind` for this story's content is saved."""
    return save_path(story.story, kind, story_key(story))


def save_path(name: str, kind: str, key: str) -> Path:
    """Where the save of `kind` for story `name` is, its content named by `key`: the file's
    name hashes the key with the save format and the versions of the libraries."""
    if not _VERSIONS:
        _VERSIONS.extend(_versions())
    digest = hashlib.sha256(json.dumps([SAVE_FORMAT, key, kind, _VERSIONS]).encode()).hexdigest()
    return derived_dir() / "index" / f"{_stem(name, kind)}.{digest[:32]}{SUFFIX}"


def _stem(name: str, kind: str) -> str:
    # readable, and never a path: the story name is a file stem, the kind may carry options
    return f"{name}.{re.sub(r'[^A-Za-z0-9_.=-]', '_', kind)}"


def load_saved(path: Path, kind: str, type_name: str, load, lazy: bool = False):
    """The index saved at `path`, made by `load(state)` from the state a save of `kind`
    and `type_name` (the saved object's class) holds; None when there is none, it does not
    load, or it holds another index. Such a file is removed with one warning, and the index
    is rebuilt. `lazy`: the state's arrays are read when first asked for (garden._state),
    from the file opened here, which stays open as long as they may be."""
    refuse_link(path)
    try:
        fh = open(path, "rb")
        try:
            # only a file this user owns and no one else can read or write is read: the garden
            # writes its saves 0600; anything else may have been put there by someone else
            st = os.fstat(fh.fileno())
            problem = distrust(st) if stat.S_ISREG(st.st_mode) else "not a regular file"
            if problem is not None:
                warn(f"{path}: saved index not loaded: {problem} (a save is this user's, 0600); rebuilding")
                fh.close()
                _drop(path)
                return None
            state = read_state(fh, kind, type_name, lazy=lazy)
        except BaseException:
            fh.close()
            raise
        if not lazy:
            fh.close()
        return load(state)
    except FileNotFoundError:
        return None
    except WrongIndex as exc:
        warn(f"{path}: saved index is not a {kind} of this garden ({exc}); removed, rebuilding")
    except Exception as exc:  # torn, edited or not an index: whatever reading raised, rebuild
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
        warn(f"{path}: saved index does not load ({reason}); removed, rebuilding")
    _drop(path)
    return None


def _drop(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:   # another user's file in a folder we cannot change: the rebuild's save replaces it
        pass


def save(path: Path, state_of, name: str, kind: str, type_name: str) -> None:
    """Write the state `state_of()` gives to `path` whole or not at all, then drop older saves of the same
    story (`name`) and kind. A save that fails is a warning, never a failed query: the index in
    memory is complete either way."""
    try:
        folder = derived_folder("index")
        refuse_link(path)
        remove_orphans(folder, ".tmp")
        state = state_of()
        write_whole(path, lambda out: write_state(out, kind, type_name, state))
    except (OSError, ValueError, TypeError) as exc:
        warn(f"{path}: index not saved ({exc}); it is rebuilt in the next process")
        return
    suffixes = "|".join(re.escape(s) for s in (SUFFIX, *OLD_SUFFIXES))
    mine = re.compile(re.escape(_stem(name, kind)) + r"\.[0-9a-f]{32}(?:" + suffixes + ")")
    for old in folder.iterdir():
        if old.name != path.name and mine.fullmatch(old.name) and not old.is_symlink():
            old.unlink(missing_ok=True)


class IndexCache:
    def __init__(self, bound: int = 64, read_saved: bool = True):
        self._entries: ProcessCache = ProcessCache(bound)
        self.read_saved = read_saved  # False: build afresh (and save) rather than load a save

    def _saved_or_built(self, story: Story, kind: str, type_name: str, build, load, state_of):
        """The index of `kind`: `load(state)` of its save when there is a good one, else
        `build()`, then saved as `state_of(index)` gives it."""
        with collector_paused():  # see garden._bulk: an index is a few hundred thousand objects
            path = saved_path(story, kind)
            if self.read_saved:
                value = load_saved(path, kind, type_name, load)
                if value is not None:
                    COUNTS[f"{kind}:loaded"] += 1
                    return value
            value = build()
            COUNTS[f"{kind}:built"] += 1
            save(path, lambda: state_of(value), story.story, kind, type_name)
            return value

    def retriever(self, story: Story, name: str) -> Retriever:
        def make():
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
                                        lambda r: r.state())

        return self._entries.get(("retriever", story_key(story), name, str(derived_dir())), make)

    def phrase_index(self, story: Story) -> PhraseIndex:
        def make():
            docs = documents(story)
            return self._saved_or_built(story, "phrase", "PhraseIndex",
                                        lambda: PhraseIndex({d.id: d.text for d in docs}),
                                        lambda state: PhraseIndex.from_state(
                                            state, docs if hasattr(docs, "encoded_ids") else doc_ids(docs)),
                                        lambda index: index.state())

        return self._entries.get(("phrase", story_key(story), str(derived_dir())), make)

    def clear(self) -> None:
        self._entries.clear()

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
