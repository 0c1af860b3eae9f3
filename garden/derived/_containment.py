"""The containment rule every folder of derived data follows, the garden home's and the
user's cache's alike (home.py, cache.py): a root the user chose is followed, every folder
the garden makes below it, and every file it writes there, must be its own.

Its own module, below both, so that the cache can follow it without importing the home,
whose environment check reads the cache's settings (docs/layers.md).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from garden.errors import GardenError


# The garden home may be a link the user made (it is followed, like any path a user gives).
# Below it, every folder the garden creates (index/, embeddings/, traces/ and their
# subfolders) and every file it writes there must be its own: a link found there was put by
# someone else, and writing through it would write outside the store, so it is refused.

LINK_REFUSAL = "is a symbolic link; the garden does not write through links it did not create"
# Derived data is owner-only (no group or other bits): traces hold every query asked, and
# `garden doctor` enforces the rule. Files made with mkstemp are 0600 already.
FOLDER_MODE, FILE_MODE = 0o700, 0o600


def _home_label(home: Path) -> str:
    return f"GARDEN_HOME={home}" if os.environ.get("GARDEN_HOME") else str(home)


def _check_home(home: Path, create: bool, label: str | None = None) -> None:
    name = label or _home_label(home)
    try:
        mode = os.stat(home).st_mode  # followed: the user chose this path
    except FileNotFoundError:
        if not create:
            return
        try:
            os.makedirs(home, mode=FOLDER_MODE, exist_ok=True)
        except OSError as exc:
            raise GardenError(f"{name}: cannot create the folder: {exc.strerror or exc}") from None
        return
    except OSError as exc:
        raise GardenError(f"{name}: cannot use it as a folder: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise GardenError(f"{name}: not a folder; the garden keeps its derived data in a folder")


def _check_folder(path: Path, create: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not create:
            return
        try:
            os.mkdir(path, FOLDER_MODE)
            return
        except FileExistsError:  # made meanwhile by another process, or by someone else: look again
            mode = os.lstat(path).st_mode
        except OSError as exc:
            raise GardenError(f"{path}: cannot create the folder: {exc.strerror or exc}") from None
    if stat.S_ISLNK(mode):
        raise GardenError(f"{path} {LINK_REFUSAL}")
    if not stat.S_ISDIR(mode):
        raise GardenError(f"{path}: exists and is not a folder; the garden keeps derived data there (move it away)")


def folder_under(root: Path, parts: tuple[str, ...], create: bool = True, label: str | None = None) -> Path:
    """`root/parts...` by the containment rule above: the root is followed (the user chose
    it), every folder below it must be the garden's own. `label` names the root in errors
    (an environment variable that set it), else the home's own label."""
    _check_home(root, create, label)
    path = root
    for part in parts:
        path = path / part
        _check_folder(path, create)
    return path


def refuse_link(path: Path) -> None:
    """GardenError unless `path` is absent or a regular file: the garden replaces or appends
    to files it made, never a link or anything else that stands in their place."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise GardenError(f"{path} {LINK_REFUSAL}")
    if not stat.S_ISREG(mode):
        raise GardenError(f"{path}: exists and is not a regular file; the garden writes a file there (move it away)")
