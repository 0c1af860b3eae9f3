"""Document embeddings, cached once per user: content-addressed by (space, text), where the
space names the model and the encoder backend (`all-MiniLM-L6-v2/onnx-int8-…`), so vectors
of one backend are never read as another's.

One SQLite file in the user's cache (`garden.derived.cache`): a lookup by key costs the
keys asked for, not the size of the cache, so one small story's query does not read the
vectors of every store the user ever embedded; SQLite's locking makes it safe for processes
that read and write at once (write-ahead log, a busy timeout). Each row carries the time it
was last used; when the file outgrows `GARDEN_CACHE_LIMIT`, the least recently used rows
are removed (oldest first, ties by key) down to nine tenths of the limit and the space is
given back to the file system.

Damage heals, as it always has: a row whose vector is not `dim` finite float32 numbers is
deleted and its text encoded again; a file SQLite cannot read (truncated, overwritten, not a
database) is removed with one warning and started anew. Either way it costs encoding, never
a failed query.
"""
from __future__ import annotations

import math
import os
import sqlite3
import time
from collections.abc import Iterable
from contextlib import closing, contextmanager
from pathlib import Path

import numpy as np

from garden._notice import warn
from garden.derived.cache import cache_folder, cache_limit
from garden.derived.home import FILE_MODE, private_path, refuse_link
from garden.errors import GardenError

FILE_NAME = "embeddings.sqlite3"
FORMAT_VERSION = 1
TOUCH_AFTER = 3600  # seconds: a row's use is written at most hourly, so a warm read writes nothing
BUSY_TIMEOUT = 60.0  # seconds another process may hold the write lock (a long encode commits in chunks)
LOCKED_RETRIES = 5  # a lock SQLite refuses at once, without waiting, is asked for this many times more
_BATCH = 500  # keys per statement, under SQLite's limit on bound parameters
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    space TEXT NOT NULL, key TEXT NOT NULL, vector BLOB NOT NULL, used INTEGER NOT NULL, UNIQUE (space, key));
CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used, space, key);
"""


COMPANIONS = ("-wal", "-shm")   # SQLite's write-ahead log and its index, beside the file
ASIDE_SUFFIX = ".other-schema"   # a cache of another schema is kept under this name, not removed
_COLUMNS = ("space", "key", "vector", "used")


class OtherSchema(sqlite3.DatabaseError):
    """A readable SQLite file that is not this garden's cache (another format or other tables)."""


def _tables(db: sqlite3.Connection) -> list[str]:
    return [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _our_schema(db: sqlite3.Connection, version: int) -> bool:
    """Whether the file holds this garden's table as it lays it out (format 0: nothing yet)."""
    if version == 0:
        return not _tables(db)
    columns = tuple(row[1] for row in db.execute("PRAGMA table_info(vectors)"))
    return columns == _COLUMNS


def cache_file() -> Path:
    return cache_folder("embeddings") / FILE_NAME


def _chunks(items: list, size: int = _BATCH) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _Locked(Exception):
    """A lock SQLite refused at once (see `EmbeddingCache._with_db`)."""


@contextmanager
def _transaction(db: sqlite3.Connection):
    """One write transaction, taken at once: with autocommit on, each statement would be its own."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _damaged(exc: sqlite3.Error) -> bool:
    """A file SQLite cannot read, as against one it could not lock or write in time."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


class EmbeddingCache:
    """The vectors of one space (model and backend) in the user's cache file."""

    def __init__(self, space: str, path: Path | None = None):
        self.space = space
        self._path = path

    @property
    def path(self) -> Path:
        return self._path or cache_file()

    # --- the file ------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        path = self.path
        if self._path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        refuse_link(path)
        # a cache file (or its log) another user owns or may write is not read: removed and made
        # anew, or made in a private folder for this run (garden.derived.home, "trust")
        trusted = private_path(path, "embedding cache", COMPANIONS)
        if trusted != path:
            self._path = path = trusted
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE))  # owner-only, like all derived data
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous = NORMAL")  # a cache may lose its last write to a power cut, no more
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, FORMAT_VERSION) or not _our_schema(db, version):
                tables = ", ".join(_tables(db)) or "none"
                raise OtherSchema(f"cache format {version} with tables {tables}; this garden writes format "
                                  f"{FORMAT_VERSION}")
            if version == 0:
                # both take effect on an empty file only: pages of 8 KiB hold five 1.5 KiB vectors
                # (rows stay inline, no overflow pages), and freed pages can go back to the disk
                db.execute("PRAGMA page_size = 8192")
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                db.execute("PRAGMA journal_mode = WAL")
                db.executescript(_SCHEMA)
                db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        except BaseException:
            db.close()
            raise
        return db

    def _move_aside(self, exc: "OtherSchema") -> None:
        """A file of another schema (another garden's, a newer format) is kept, under the name
        ASIDE_SUFFIX added, in place of any kept before; a new cache starts in its place."""
        aside = Path(f"{self.path}{ASIDE_SUFFIX}")
        try:
            os.replace(self.path, aside)
            for suffix in COMPANIONS:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        except OSError as err:
            raise GardenError(f"{self.path}: an embedding cache of another schema ({exc}); cannot move it "
                              f"aside ({err.strerror or err}); move it away or point GARDEN_CACHE at another "
                              "folder") from None
        warn(f"{self.path}: an embedding cache of another schema ({exc}); moved aside to {aside.name}, a new one "
             "started (its texts are encoded again)")

    def _heal(self, exc: sqlite3.Error) -> None:
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:120]
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(f"{self.path}{suffix}").unlink()
            except FileNotFoundError:
                pass  # another process found it damaged too and removed it first
            except OSError as err:
                warn(f"{self.path}: damaged embedding cache ({reason}); cannot remove it "
                     f"({err.strerror or err}), its texts are encoded again")
                return
        warn(f"{self.path}: damaged embedding cache ({reason}); removed, its texts are encoded again")

    def _with_db(self, work, fallback):
        """`work(db)`; a damaged file is removed (with its warning) and `fallback` returned.
        A lock refused at once rather than waited for (SQLite answers SQLITE_BUSY without its
        busy timeout where waiting could deadlock: two processes making a new file's schema
        and log at once, a read that would become a write) is tried again, a few times: every
        `work` here is whole or nothing, so doing it again is safe."""
        for attempt in range(LOCKED_RETRIES + 1):
            began = time.monotonic()
            try:
                return self._once(work, fallback)
            except _Locked:
                if time.monotonic() - began >= BUSY_TIMEOUT / 2:
                    break   # waited for and not given: another process holds it, asking again would wait again
                time.sleep(0.05 * (attempt + 1))
        raise GardenError(f"{self.path}: the embedding cache cannot be used (database is locked); "
                          "free the disk or point GARDEN_CACHE at another folder")

    def _once(self, work, fallback):
        try:
            try:
                db = self._connect()
            except OtherSchema as exc:
                self._move_aside(exc)
                db = self._connect()
            with closing(db):
                return work(db)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise _Locked() from None
            return self._failed(exc, fallback)
        except sqlite3.Error as exc:
            return self._failed(exc, fallback)

    def _failed(self, exc: sqlite3.Error, fallback):
        if not _damaged(exc):  # a full disk, a read-only folder
            raise GardenError(f"{self.path}: the embedding cache cannot be used ({exc}); "
                              "free the disk or point GARDEN_CACHE at another folder") from None
        self._heal(exc)
        return fallback

    # --- reading and writing -------------------------------------------------------------------
    def load(self, wanted: Iterable[str], dim: int) -> dict[str, np.ndarray]:
        """The cached vectors of the `wanted` keys (sha256 hex of each text)."""
        keys = sorted(set(wanted))
        if not keys:
            return {}
        return self._with_db(lambda db: self._load(db, keys, dim), {})

    def _load(self, db: sqlite3.Connection, keys: list[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        bad: list[str] = []
        stale: list[str] = []
        now = int(time.time())
        for part in _chunks(keys):
            marks = ",".join("?" * len(part))
            rows = db.execute(f"SELECT key, vector, used FROM vectors WHERE space = ? AND key IN ({marks})",
                              [self.space, *part])
            for key, blob, used in rows:
                whole = isinstance(blob, bytes) and len(blob) == dim * 4
                vector = np.frombuffer(blob, dtype=np.float32) if whole else None
                if vector is None or not np.isfinite(vector).all():
                    bad.append(key)
                    continue
                found[key] = vector
                if used < now - TOUCH_AFTER:
                    stale.append(key)
        if bad:
            warn(f"{self.path}: {len(bad)} damaged embedding entr{'y' if len(bad) == 1 else 'ies'} in "
                 f"{self.space}; removed, their texts are encoded again")
        if bad or stale:
            with _transaction(db):
                self._delete(db, bad)
                for part in _chunks(stale):
                    db.execute(f"UPDATE vectors SET used = ? WHERE space = ? AND key IN ({','.join('?' * len(part))})",
                               [now, self.space, *part])
        return found

    def _delete(self, db: sqlite3.Connection, keys: list[str]) -> None:
        for part in _chunks(keys):
            db.execute(f"DELETE FROM vectors WHERE space = ? AND key IN ({','.join('?' * len(part))})",
                       [self.space, *part])

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        """Store `vectors` (one row per key), then keep the file within the limit."""
        if not keys:
            return
        now = int(time.time())
        rows = [(self.space, key, np.ascontiguousarray(row, dtype=np.float32).tobytes(), now)
                for key, row in zip(keys, vectors)]

        def write(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.executemany("INSERT OR REPLACE INTO vectors (space, key, vector, used) VALUES (?, ?, ?, ?)", rows)
            prune(db, cache_limit())

        self._with_db(write, None)


def used_bytes(db: sqlite3.Connection) -> int:
    """Bytes of the file holding rows (free pages not counted)."""
    pages, free, size = (db.execute(f"PRAGMA {name}").fetchone()[0]
                         for name in ("page_count", "freelist_count", "page_size"))
    return (pages - free) * size


def prune(db: sqlite3.Connection, limit: int) -> int:
    """Remove the least recently used rows until the rows take at most nine tenths of
    `limit`; return how many went. Under the limit, nothing is done."""
    if used_bytes(db) <= limit:
        return 0
    removed, target = 0, limit * 9 // 10
    while (used := used_bytes(db)) > target:
        rows = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        if rows == 0:
            break
        excess = max(1, math.ceil((used - target) * rows / used))  # rows' share of the bytes over
        with _transaction(db):
            removed += db.execute("DELETE FROM vectors WHERE rowid IN "
                                  "(SELECT rowid FROM vectors ORDER BY used, space, key LIMIT ?)", (excess,)).rowcount
    db.executescript("PRAGMA incremental_vacuum;")  # run to the end: execute() would step it once, one page
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file itself shrinks only when the log is copied back
    return removed


def describe(path: Path | None = None) -> dict:
    """What the cache holds, for `garden doctor`: its file, size, limit and rows per space.
    Nothing is created."""
    path = path or cache_folder("embeddings", create=False) / FILE_NAME
    report = {"path": str(path), "bytes": 0, "limit": cache_limit(), "spaces": {}}
    try:
        if not path.is_file():
            return report
        report["bytes"] = path.stat().st_size
    except OSError as exc:  # a cache this user cannot reach: reported, not fatal to the report
        report["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        return report
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT)) as db:
            report["spaces"] = dict(db.execute("SELECT space, COUNT(*) FROM vectors GROUP BY space ORDER BY space"))
    except sqlite3.Error as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    return report
