"""What a story's retrieval needs, built once: retrievers and the phrase index.

An `IndexCache` holds them in memory, keyed by the story's content (so an edited story is
rebuilt) and, for retrievers, by the garden home (a retriever built against one home's
embedding cache must not stand in for another's). It keeps at most `bound` entries,
dropping the least recently used. `PROCESS_INDEXES` is the one the command line and the
API share for a process. Control records are never indexed: they are stored and validated,
never candidates.

Indexes are also saved under the garden home (`index/`), content-addressed: the file's
name carries a hash of the story's content, the retriever's name with its options, the
save format and the versions of the libraries whose objects are saved. A second process on
an unchanged story loads them instead of building; anything changed gives another name, so
a stale index is never read. A save is written to a temporary file in the same folder and
renamed into place: a crash or a concurrent build never leaves a torn index, and the
previous one stays readable until the new one is complete. Older saves of the same story
and retriever are removed once the new one is in place. A saved file that does not load
(damaged on disk) is removed with one warning and rebuilt.

The files are pickles. The garden home is the garden's own, owner-only folder (`garden
doctor` enforces it), read by nothing else; a file that is a link is refused. A retriever
that should not be saved sets `persist = False`; one that keeps part of its state
elsewhere (the dense retriever's embeddings live in their own cache) leaves it out of the
pickle and takes it back in `restore`.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import stat
import sys
from collections import Counter
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from garden._bulk import collector_paused
from garden._notice import warn
from garden.derived.home import derived_dir, derived_folder, refuse_link, remove_orphans, write_whole
from garden.models import Story
from garden.rerank.phrase import PhraseIndex
from garden.retrievers import Doc, ProcessCache, Retriever, make_retriever

SAVE_FORMAT = 3  # 2: bm25 keeps postings; 3: retrievers keep their ids as DocIds
# the libraries whose objects a saved index holds: a new version of any may read an old
# pickle differently, so it gives the index another name
SAVED_WITH = ("pinecone-garden", "numpy", "scipy", "bm25s", "rank-bm25", "scikit-learn")
SUFFIX = ".pkl"

# what this process did, by kind ("retriever:bm25", "phrase"): built, loaded from a save
COUNTS: Counter = Counter()


def story_key(story: Story) -> str:
    """sha256 of the story's validated content: the key of everything derived from it."""
    return story.remembered("key", lambda s: hashlib.sha256(
        json.dumps(s.model_dump(mode="json"), sort_keys=True).encode()).hexdigest())


def documents(story: Story) -> tuple[Doc, ...]:
    """What every index of the story indexes, made once per story: every retriever and the
    phrase index read the same list (at 100,000 records, 0.7 s to make)."""
    return story.remembered("documents", lambda s: tuple(Doc(r.id, r.searchable) for r in s.records
                                                          if r.kind != "control"))


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
    if not _VERSIONS:
        _VERSIONS.extend(_versions())
    digest = hashlib.sha256(json.dumps([SAVE_FORMAT, story_key(story), kind, _VERSIONS]).encode()).hexdigest()
    return derived_dir() / "index" / f"{_stem(story, kind)}.{digest[:32]}{SUFFIX}"


def _stem(story: Story, kind: str) -> str:
    # readable, and never a path: the story name is a file stem, the kind may carry options
    return f"{story.story}.{re.sub(r'[^A-Za-z0-9_.=-]', '_', kind)}"


def load_saved(path: Path, expected: type | None = None):
    """The object saved at `path`, or None when there is none, it does not load, or it
    loads as something other than an `expected` (a file that unpickles to an int or a dict
    would fail every query that reads it): such a file is removed with one warning, and the
    index is rebuilt."""
    refuse_link(path)
    try:
        with open(path, "rb") as fh:
            # a pickle runs code as it loads: only a file this user owns and no one else can
            # read or write is loaded (the garden writes its saves 0600); anything else may
            # have been put there by someone else, and is rebuilt over, never loaded
            st = os.fstat(fh.fileno())
            if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
                warn(f"{path}: saved index not loaded: owned by uid {st.st_uid} with mode "
                     f"{stat.S_IMODE(st.st_mode):04o} (a save is this user's, 0600); rebuilding")
                _drop(path)
                return None
            value = pickle.load(fh)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged file: whatever unpickling raised, rebuild
        warn(f"{path}: saved index does not load ({type(exc).__name__}); removed, rebuilding")
        path.unlink(missing_ok=True)
        return None
    if expected is not None and type(value) is not expected:
        warn(f"{path}: saved index loads as {type(value).__name__}, not {expected.__name__}; removed, rebuilding")
        path.unlink(missing_ok=True)
        return None
    return value


def _drop(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:   # another user's file in a folder we cannot change: the rebuild's save replaces it
        pass


def save(path: Path, value, story: Story, kind: str) -> None:
    """Write `value` to `path` whole or not at all, then drop older saves of the same
    story and kind. A save that fails is a warning, never a failed query: the index in
    memory is complete either way."""
    try:
        folder = derived_folder("index")
        refuse_link(path)
        remove_orphans(folder, ".tmp")
        write_whole(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
        warn(f"{path}: index not saved ({exc}); it is rebuilt in the next process")
        return
    mine = re.compile(re.escape(_stem(story, kind)) + r"\.[0-9a-f]{32}" + re.escape(SUFFIX))
    for old in folder.iterdir():
        if old.name != path.name and mine.fullmatch(old.name) and not old.is_symlink():
            old.unlink(missing_ok=True)


class IndexCache:
    def __init__(self, bound: int = 64, read_saved: bool = True):
        self._entries: ProcessCache = ProcessCache(bound)
        self.read_saved = read_saved  # False: build afresh (and save) rather than load a save

    def _saved_or_built(self, story: Story, kind: str, build, restore=None, expected: type | None = None):
        with collector_paused():  # see garden._bulk: an index is a few hundred thousand objects
            return self._saved_or_built_now(story, kind, build, restore, expected)

    def _saved_or_built_now(self, story: Story, kind: str, build, restore=None, expected: type | None = None):
        path = saved_path(story, kind)
        if self.read_saved:
            value = load_saved(path, expected)
            if value is not None and restore is not None:
                try:
                    restore(value)
                except Exception as exc:   # the right type with the wrong insides: as damaged
                    warn(f"{path}: saved index does not restore ({type(exc).__name__}); removed, rebuilding")
                    path.unlink(missing_ok=True)
                    value = None
            if value is not None:
                COUNTS[f"{kind}:loaded"] += 1
                return value
        value = build()
        COUNTS[f"{kind}:built"] += 1
        save(path, value, story, kind)
        return value

    def retriever(self, story: Story, name: str) -> Retriever:
        def make():
            docs = documents(story)
            retriever = make_retriever(name)

            def build():
                retriever.index(docs)
                return retriever

            if not getattr(retriever, "persist", False):
                return build()
            return self._saved_or_built(story, f"retriever:{name}", build, lambda r: r.restore(docs),
                                        type(retriever))

        return self._entries.get(("retriever", story_key(story), name, str(derived_dir())), make)

    def phrase_index(self, story: Story) -> PhraseIndex:
        def make():
            return self._saved_or_built(story, "phrase",
                                        lambda: PhraseIndex({d.id: d.text for d in documents(story)}),
                                        expected=PhraseIndex)

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
