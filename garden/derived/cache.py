"""The user's cache: derived data that depends only on a model and a text, so every checkout
and every story of one user can share it (document embeddings, exported model files).

Where it is, by the platform's convention for per-user caches (the `platformdirs` rule, as
the model hub's cache and ir_datasets' home keep theirs): `$XDG_CACHE_HOME/pinecone-garden`
or `~/.cache/pinecone-garden` on Linux, `~/Library/Caches/pinecone-garden` on macOS,
`%LOCALAPPDATA%\\pinecone-garden\\Cache` on Windows. `GARDEN_CACHE` moves it (a test, a
shared machine, a disk with room). `GARDEN_CACHE_LIMIT` bounds the embeddings in it
(`500M`, `2G`; default 2G): past it, the least recently used entries are pruned.

Like the garden home, all of it is disposable: removing it costs encoding again, nothing else.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from garden.derived._containment import folder_under
from garden.errors import GardenError

APP_NAME = "pinecone-garden"
DEFAULT_LIMIT = 2 * 1024**3
MIN_LIMIT = 1024**2  # below a megabyte no story's embeddings fit: a typo, not a policy
CACHE_FOLDERS = ("embeddings", "models")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


_STAND_IN: list[Path] = []   # a private folder standing in for an unusable cache, for the rest of this process


def user_cache_dir() -> Path:
    """`$GARDEN_CACHE` if set, else the platform's per-user cache folder for the garden (or
    the private folder standing in for it: `stand_in_if_unusable`)."""
    if _STAND_IN:
        return _STAND_IN[0]
    chosen = os.environ.get("GARDEN_CACHE")
    if chosen:
        return Path(chosen)
    from platformdirs import user_cache_dir as platform_cache

    return Path(platform_cache(APP_NAME, appauthor=False))


def cache_label(root: Path | None = None) -> str:
    """How errors name the cache: by the variable that chose it, or by its path."""
    root = root or user_cache_dir()
    return f"GARDEN_CACHE={root}" if os.environ.get("GARDEN_CACHE") else str(root)


def cache_folder(*parts: str, create: bool = True) -> Path:
    """`user_cache_dir()/parts...`, made if missing, under the garden home's containment rule:
    the cache folder itself is followed if it is a link (the user chose it), no folder the
    garden makes below it may be one."""
    root = user_cache_dir()
    return folder_under(root, parts, create, label=cache_label(root))


def parse_size(text: str, source: str) -> int:
    """A size in bytes from `1234`, `500K`, `500M`, `2G` or `1T` (binary units, an optional
    trailing `B` or `iB`); at least a megabyte."""
    m = re.fullmatch(r"\s*([0-9]{1,15})\s*([KMGT]?)(?:i?B)?\s*", text, re.ASCII | re.IGNORECASE)
    if m is None or int(m.group(1)) * _UNITS[m.group(2).upper()] < MIN_LIMIT:
        raise GardenError(f"{source} must be a size of at least 1M, such as 500M or 2G, got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def cache_limit() -> int:
    """`GARDEN_CACHE_LIMIT` in bytes, else the default (2 GiB)."""
    raw = None if _STAND_IN else os.environ.get("GARDEN_CACHE_LIMIT")
    return parse_size(raw, "GARDEN_CACHE_LIMIT") if raw else DEFAULT_LIMIT


def check_cache_environment() -> None:
    """GardenError if GARDEN_CACHE or GARDEN_CACHE_LIMIT cannot be used; nothing is made."""
    cache_limit()
    for folder in CACHE_FOLDERS:
        cache_folder(folder, create=False)


def stand_in_if_unusable(work: str) -> None:
    """For a command whose own work needs no cache (a backup, a restore) but which may run
    cases that encode: when GARDEN_CACHE or GARDEN_CACHE_LIMIT cannot be used, one warning,
    and a private folder made for this process stands in for the cache (its texts are
    encoded again, nothing is kept), rather than refusing the command."""
    if _STAND_IN:
        return
    try:
        check_cache_environment()
    except GardenError as exc:
        import tempfile

        from garden._notice import warn

        _STAND_IN.append(Path(tempfile.mkdtemp(prefix="pinecone-garden-cache-")))
        warn(f"{exc.messages[0]}; {work} uses a private cache for this run ({_STAND_IN[0]}), kept nowhere")

