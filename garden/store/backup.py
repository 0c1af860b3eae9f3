"""`garden backup`: the durable part of a store as one archive, with a manifest of hashes.

Derived data is left out: it rebuilds. The archive is a gzip'd tar holding only regular
files (no links, no folders, no owners, every time fixed at zero), so the same store gives
the same bytes, and restore can refuse anything else. It is written aside and renamed into
place: a failed backup leaves no half archive.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from garden.derived.home import write_whole
from garden.errors import GardenError
from garden.store.doctor import attachment_facts, walk
from garden.formats.layout import DURABLE_FOLDERS, StoreLayout
from garden.store.manifest import MANIFEST, MANIFEST_HASH, Manifest, ManifestFile, manifest_bytes
from garden.text import shown

try:
    import fcntl
except ImportError:   # no advisory locks: nothing takes one to write either
    fcntl = None


@dataclass(frozen=True)
class BackupReport:
    archive: Path
    manifest: Manifest

    def per_folder(self) -> dict[str, int]:
        """Files archived in each durable folder, every folder named (0 when absent)."""
        counts = dict.fromkeys(DURABLE_FOLDERS, 0)
        for f in self.manifest.files:
            counts[f.path.split("/", 1)[0]] += 1
        return counts

    def lines(self) -> list[str]:
        passed = sum(1 for v in self.manifest.verdicts if v["passed"])
        folders = ", ".join(f"{name}/ {count}" for name, count in self.per_folder().items())
        return [f"wrote {self.archive}: {len(self.manifest.files)} durable files with their sha256 "
                f"({sum(f.size for f in self.manifest.files)} bytes: {folders}); {len(self.manifest.verdicts)} "
                f"case verdicts under {self.manifest.pipeline} recorded for the restore drill ({passed} passed); "
                "derived data left out (it rebuilds)"]

    def to_json(self) -> dict:
        return {"archive": str(self.archive), "files": len(self.manifest.files), "folders": self.per_folder(),
                "bytes": sum(f.size for f in self.manifest.files), "pipeline": self.manifest.pipeline,
                "verdicts": len(self.manifest.verdicts)}


READ_TRIES = 3


def _read_once(path: Path, shown: str) -> tuple[bytes, os.stat_result, os.stat_result]:
    """(the bytes, the file's status before the read, and after it)."""
    from garden._files import open_regular

    try:
        with open_regular(path) as fh:
            before = os.fstat(fh.fileno())
            data = fh.read()
        return data, before, os.stat(path, follow_symlinks=False)
    except GardenError as exc:
        raise GardenError(f"backup refused: {exc.messages[0]}; nothing written") from None
    except OSError as exc:
        raise GardenError(f"backup refused: {shown}: cannot read: {exc.strerror or exc}; nothing written") from None


def _identity(st: os.stat_result) -> tuple:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def stable_read(path: Path, shown: str) -> tuple[bytes, int]:
    """(the bytes, the permission bits) of a durable file read while nothing changed it, or
    the backup is refused after READ_TRIES tries. A file rewritten while it was read would
    otherwise be archived torn, its hash agreeing with the torn bytes.

    Nothing changed it when its size, times and inode are the same before and after the
    read, and, for a file changed within the last RACY_NS (whose times a write in the same
    clock tick would leave as they were), when a second read once that window has passed
    gives the same bytes and the same status."""
    with _no_writer(path):
        return _stable_read(path, shown)


@contextmanager
def _no_writer(path: Path):
    """A shared lock on the file for as long as it is read: a story a server writes to
    (garden/formats/story_writer.py takes the exclusive one for each write) waits, so the
    read sees it between two writes, never in the middle of one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:   # unreadable: the read says why
        yield
        return
    try:
        if fcntl is not None and stat.S_ISREG(os.fstat(fd).st_mode):
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _stable_read(path: Path, shown: str) -> tuple[bytes, int]:
    from garden._files import RACY_NS

    for _ in range(READ_TRIES):
        data, before, after = _read_once(path, shown)
        if _identity(before) != _identity(after) or len(data) != after.st_size:
            continue
        age = time.time_ns() - max(after.st_mtime_ns, after.st_ctime_ns)
        if age >= RACY_NS:
            return data, stat.S_IMODE(after.st_mode)
        time.sleep(min(RACY_NS, RACY_NS - age) / 1e9)   # a time in the future waits no longer
        again, first, last = _read_once(path, shown)
        if again == data and _identity(first) == _identity(after) == _identity(last):
            return data, stat.S_IMODE(after.st_mode)
    raise GardenError(f"backup refused: {shown}: changed while it was read ({READ_TRIES} tries); run the backup "
                      "again when nothing is writing to the store; nothing written")


def durable_files(layout: StoreLayout) -> list[Path]:
    """Every regular file of the durable part, sorted. A link or a special file there is
    refused, naming it: the archive stores bytes, and a link is not the store's to follow."""
    files, problems = [], []
    for folder in layout.durable_folders():
        for entry in walk(folder, "durable", layout.root):
            if entry.unreadable is not None:
                problems.append(f"{layout.shown(entry.path)}: a folder of the durable part that cannot be listed "
                                f"({entry.unreadable}); the archive would lack what is below it")
            elif entry.kind == "link":
                problems.append(f"{layout.shown(entry.path)}: a symbolic link in the durable part; a backup holds "
                                "files, not links (`garden doctor` reports it)")
            elif entry.kind == "derived-store":
                continue   # a Milvus Lite store made in a durable folder: derived, it rebuilds
            elif entry.kind == "file" and not stat.S_ISREG(entry.mode):
                problems.append(f"{layout.shown(entry.path)}: not a regular file; a backup holds files")
            elif entry.kind == "file":
                files.append(entry.path)
    facts, unreadable = attachment_facts(layout)
    problems += [f"{layout.shown(f.path)}: record {f.record}: {f.problem}" for f in facts if f.problem]
    problems += [f"{layout.shown(story)}: {problem}" for story, problem in unreadable]
    if problems:
        raise GardenError([f"backup refused: {p}" for p in problems])
    return sorted(files, key=lambda p: p.relative_to(layout.root).as_posix())


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def write_backup(root: str | Path | None, out: str | Path, pipeline: str = "default", *,
                 verdicts: Callable[[Path, str], list[dict]]) -> BackupReport:
    """Archive the durable part of the store at `root` into `out` (which must not exist),
    with the manifest and the cases' verdicts under `pipeline`, as `verdicts(root, pipeline)`
    gives them (garden.evaluation.drill.case_verdicts: the store keeps them, the evaluation
    runs the cases, so the caller hands one to the other)."""
    layout = StoreLayout.at(root)
    out = Path(os.path.abspath(out))
    if os.path.lexists(out):
        raise GardenError(f"--out {shown(str(out))}: exists; a backup never overwrites a file (name a new one)")
    if not out.parent.is_dir():
        raise GardenError(f"--out {shown(str(out))}: no folder {shown(str(out.parent))} to write it in")
    real_out = Path(os.path.realpath(out.parent)) / out.name
    for folder in layout.durable_folders():
        if real_out.is_relative_to(os.path.realpath(folder)):
            raise GardenError(f"--out {shown(str(out))}: inside the durable folder {folder.name}/; "
                              "a backup would then hold itself")
    contents = []
    for path in durable_files(layout):
        data, mode = stable_read(path, layout.shown(path))
        contents.append((ManifestFile(path=path.relative_to(layout.root).as_posix(), size=len(data),
                                      sha256=hashlib.sha256(data).hexdigest(), mode=mode), data))
    manifest = Manifest(pipeline=pipeline, files=[f for f, _ in contents],
                        verdicts=verdicts(layout.root, pipeline))
    text = manifest_bytes(manifest)
    def archive(raw) -> None:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            _add(tar, MANIFEST, text, 0o644)
            _add(tar, MANIFEST_HASH, (hashlib.sha256(text).hexdigest() + "\n").encode(), 0o644)
            for entry, data in contents:
                _add(tar, entry.path, data, entry.mode)

    try:
        # a backup holds every story: owner-only (the temporary file is made 0600), like the derived data
        write_whole(out, archive, prefix=f".{out.name}.", suffix=".part")
    except OSError as exc:
        raise GardenError(f"`out` {shown(str(out))}: cannot write there: {exc.strerror or exc}") from None
    return BackupReport(out, manifest)
