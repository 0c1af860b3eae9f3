"""Where derived data lives: indexes, embedding caches, traces. All of it is disposable.

Also how it is written safely there (no links followed, orphaned temporary files removed)
and the environment settings that govern it, checked by `check_environment`.
"""
from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from garden._notice import warn
from garden.derived._containment import FILE_MODE, LINK_REFUSAL, folder_under, refuse_link  # noqa: F401  (public here)
from garden.errors import GardenError


def derived_dir() -> Path:
    """`$GARDEN_HOME` if set, else `.garden/` under the current directory."""
    home = os.environ.get("GARDEN_HOME")
    return Path(home) if home else Path.cwd() / ".garden"


# --- containment ----------------------------------------------------------------------------
# The rule (garden/derived/_containment.py) is shared with the user's cache (cache.py).

DERIVED_FOLDERS = ("index", "traces")  # embeddings live in the user's cache (garden.derived.cache)


def derived_folder(*parts: str, create: bool = True) -> Path:
    """`derived_dir()/parts...`, ready to write in: the home and each folder below it made if
    missing; GardenError naming the path if one is a link, or is something other than a
    folder. With `create=False` nothing is made, only checked."""
    return folder_under(derived_dir(), parts, create)


# --- trust ------------------------------------------------------------------------------------
# The garden reads back only derived files that are the user's own and private: a file
# another user owns, or that others may write, could have been put or changed there by
# someone else (vectors swapped, a model that gives every text one vector), and the garden
# would serve what they chose. A private file (no group or other bits) in a folder only its
# owner may change is what the garden itself writes; anything else is refused, with one
# warning, and rebuilt: where it was, when the garden may remove it, else in a folder made
# private for this process. `garden doctor` reports each such file.

_PRIVATE_PLACES: dict[Path, Path] = {}   # a folder that cannot be trusted -> this process's private stand-in


def distrust(st: os.stat_result) -> str | None:
    """Why a derived file or folder is not to be trusted, or None: another user's (by uid),
    or group or other bits set (a folder: others may write in it)."""
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not this user (uid {os.geteuid()})"
    bits = 0o022 if stat.S_ISDIR(st.st_mode) else 0o077
    if stat.S_IMODE(st.st_mode) & bits:
        return f"mode {stat.S_IMODE(st.st_mode):04o} lets others " + ("write in it" if bits == 0o022
                                                                         else "read or write it")
    return None


def _private_stand_in(folder: Path) -> Path:
    import tempfile

    if folder not in _PRIVATE_PLACES:
        _PRIVATE_PLACES[folder] = Path(tempfile.mkdtemp(prefix="pinecone-garden-"))   # 0700, this user's
    return _PRIVATE_PLACES[folder]


def private_path(path: Path, what: str, companions: tuple[str, ...] = ()) -> Path:
    """Where the derived file `path` (and its `companions`: suffixes of files that go with
    it, such as SQLite's `-wal`) may be read and written: `path` itself when what is there
    is the user's own and private, or absent. Otherwise one warning naming it and why; the
    files are removed (they are derived) and `path` is returned to be made anew, or, when
    they cannot be removed or their folder is not the user's own, the same name in a folder
    made private for this process."""
    folder = path.parent
    if folder in _PRIVATE_PLACES:
        return _PRIVATE_PLACES[folder] / path.name
    try:
        problem = distrust(os.stat(folder))
    except OSError:
        problem = None   # no folder yet: the caller makes it, owner-only
    if problem is not None:
        stand_in = _private_stand_in(folder)
        warn(f"{folder}: {what} folder not used: {problem}; using {stand_in} for this run")
        return stand_in / path.name
    for suffix in ("", *companions):
        try:
            st = os.lstat(f"{path}{suffix}")
        except FileNotFoundError:
            continue
        problem = distrust(st)
        if problem is not None:
            break
    else:
        return path
    try:
        for suffix in ("", *companions):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    except OSError as exc:
        stand_in = _private_stand_in(folder)
        warn(f"{path}: {what} not used: {problem}; cannot remove it ({exc.strerror or exc}): using "
             f"{stand_in} for this run")
        return stand_in / path.name
    warn(f"{path}: {what} not used: {problem}; removed, made anew (owner-only)")
    return path


# --- temporary files --------------------------------------------------------------------------
# Derived files are written to a temporary name in their folder and renamed into place, so a
# reader never sees half a file. A writer killed before the rename leaves its temporary file
# behind; the next write to that folder removes such orphans, by this rule:
#   - a temporary file untouched for less than ORPHAN_MIN_AGE is kept: a live writer may be
#     between creating and renaming it, possibly on another machine sharing the folder;
#   - past that age it is removed when the name carries no writer pid (older naming), when
#     that process no longer exists on this machine, or when it is older than ORPHAN_MAX_AGE
#     (the pid was reused, or the writer ran elsewhere).
# A live writer renames its file within seconds, so no file it still uses is ever removed.

ORPHAN_MIN_AGE = 10 * 60  # seconds
ORPHAN_MAX_AGE = 24 * 60 * 60
_TEMP_PID = re.compile(r"\..*\.pid([0-9]+)\.[A-Za-z0-9_]+\.(?:part|tmp)", re.ASCII)


def temp_prefix(label: str) -> str:
    """The start of a temporary file's name: hidden, and carrying the writer's pid."""
    return f".{label}.pid{os.getpid()}."


def write_whole(path: Path, data, prefix: str | None = None, suffix: str = ".tmp") -> None:
    """Write `data` (bytes, or a function that writes to an open binary file) to `path`
    whole or not at all: a temporary file in the same folder,
    flushed to disk, then renamed over the old one (atomic on POSIX). A writer killed
    before the rename leaves only its temporary file, which the rule above removes. The
    temporary file is created exclusively under a name no one can guess (mkstemp), so a
    link planted beside the target is never written through; a link at the target itself
    is refused rather than replaced (GardenError), so nothing is written where it points
    or in its place."""
    import tempfile

    if path.is_symlink():
        from garden.errors import GardenError

        raise GardenError(f"{path}: is a symbolic link; refused (the garden writes files, not through or over links)")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix or temp_prefix(path.name), suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    if pid <= 0 or os.name != "posix":  # no usable pid: only the age can tell
        return True
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except OverflowError:
        return False  # no process can have that number
    except OSError:
        return True  # e.g. another user's process: alive
    return True


def remove_orphans(folder: Path, suffix: str, now: float | None = None) -> list[Path]:
    """Remove orphaned temporary files (names ending in `suffix`) from `folder` by the rule
    above; return what was removed. Links and anything that is not a file are left alone."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.endswith(suffix):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        age = now - st.st_mtime
        if age < ORPHAN_MIN_AGE:
            continue
        m = _TEMP_PID.fullmatch(entry.name)
        if m is not None and _alive(int(m.group(1))) and age < ORPHAN_MAX_AGE:
            continue
        try:
            os.unlink(entry.path)
        except OSError:
            continue  # another process removed it first, or it is not ours to remove
        removed.append(Path(entry.path))
    return removed


# --- settings from the environment --------------------------------------------------------------
# An empty variable counts as unset, as it does for GARDEN_HOME.

MAX_RETENTION_DAYS = 36500  # a hundred years: anything above is a typo, not a policy


def parse_days(text: str, source: str) -> int:
    """A retention window: ASCII digits only (str.isdigit would take '²'), 0..MAX."""
    digits = text.strip()
    if re.fullmatch(r"[0-9]+", digits, re.ASCII) is None or len(digits) > 9 \
            or int(digits) > MAX_RETENTION_DAYS:
        raise GardenError(f"{source} must be a whole number of days from 0 to {MAX_RETENTION_DAYS}, "
                          f"got {text!r}")
    return int(digits)


def retention_setting() -> int | None:
    """`GARDEN_TRACE_DAYS` as a number of days, or None when unset."""
    raw = os.environ.get("GARDEN_TRACE_DAYS")
    if not raw:
        return None
    return parse_days(raw, "GARDEN_TRACE_DAYS")


def tracing_enabled() -> bool:
    """`GARDEN_TRACE`: 1 (the default) writes traces, 0 writes none; anything else is refused
    rather than guessed at."""
    raw = os.environ.get("GARDEN_TRACE")
    if not raw or raw.strip() == "1":
        return True
    if raw.strip() == "0":
        return False
    raise GardenError(f"GARDEN_TRACE must be 0 (no traces) or 1 (traces on), got {raw!r}")


def check_environment(cache: bool = True) -> None:
    """Validate GARDEN_HOME, GARDEN_TRACE_DAYS, GARDEN_TRACE and (with `cache`, for work
    that may encode) GARDEN_CACHE and GARDEN_CACHE_LIMIT before any work is done; one
    GardenError line per problem. Nothing is created: the folders are checked only as far
    as they exist."""
    from garden.derived.cache import check_cache_environment

    problems: list[str] = []
    checks = [lambda: derived_folder(create=False), retention_setting, tracing_enabled]
    checks += [check_cache_environment] if cache else []
    checks += [lambda name=name: derived_folder(name, create=False) for name in DERIVED_FOLDERS]
    for check in checks:
        try:
            check()
        except GardenError as exc:
            problems += [m for m in exc.messages if m not in problems]
    if problems:
        raise GardenError(problems)
