"""Saves under the garden home (`index/`): where one goes, how it is read and written.

What every save shares, whatever it holds (a retriever, the phrase index, a story as
parsed, a stage's whole-store table): its name hashes the story's content key, its kind,
the save format and the versions of the libraries that computed it (`save_path`), so
anything changed gives another name; it is written whole or not at all and replaces the
older saves of the same story and kind (`save`); it is read only when this user owns it
and no one else may read or write it, and a file that does not load, or holds another
kind, is removed with one warning so that it is made again (`load_saved`). The index
cache (garden/pipelines/indexes.py), the saved story (garden/store/stored.py) and the stages' tables
(tables.py) all save through here.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

from garden._state import WrongIndex, read_state, write_state
from garden._notice import warn
from garden.derived.home import derived_dir, derived_folder, distrust, refuse_link, remove_orphans, write_whole
from garden.models import Story

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


def _versions() -> list[str]:
    out = [sys.version.split()[0]]
    for name in SAVED_WITH:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}==none")
    return out


_VERSIONS: list[str] = []


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
