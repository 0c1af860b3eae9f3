"""`garden restore`: an archive written by `garden backup`, back into an empty folder.

Everything is read into a temporary sibling of the target and checked there: the
manifest's own hash, each member against the manifest (name, size, sha256), and that no
member is missing or extra. Only then is the folder renamed into place. Any failure
removes the temporary folder and raises one line naming the archive and the member, so
nothing is ever left half-restored. Members that are links, folders, devices, absolute
paths or paths with `..` are refused (tar path traversal), never extracted.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from garden.errors import EXIT_FAILED, GardenError
from garden.store.manifest import MANIFEST, MANIFEST_HASH, MANIFEST_LIMIT, Manifest, member_problem
from garden.text import shown

CHUNK = 1 << 20


class Refused(Exception):
    """One member failed: `where` names it ("member 'fixtures/x.yaml'"), `why` says why."""

    def __init__(self, member: str, why: str, where: str | None = None):
        super().__init__(why)
        self.member, self.why = member, why
        self.where = where or f"member {shown(member)}"


def _read_small(tar: tarfile.TarFile, info: tarfile.TarInfo, limit: int) -> bytes:
    if info.size > limit:
        raise Refused(info.name, f"{info.size} bytes, more than a manifest of {limit} bytes")
    return tar.extractfile(info).read()


def _next_member(tar: tarfile.TarFile, expected: str | None = None) -> tarfile.TarInfo | None:
    info = tar.next()
    if info is None:
        return None
    problem = None
    if not info.isreg():
        problem = "not a regular file (a link, folder or device); a garden backup holds only files"
    elif info.issparse():
        # its holes are written out as zeros the archive does not hold: a few kilobytes could
        # declare gigabytes to write; `garden backup` never writes one
        problem = "a sparse member; a garden backup holds none, and its holes would be written as zeros"
    elif info.name not in (MANIFEST, MANIFEST_HASH):
        problem = member_problem(info.name)
    if problem:
        raise Refused(info.name, problem)
    if expected is not None and info.name != expected:
        raise Refused(info.name, f"expected {expected} here; this is not an archive `garden backup` wrote")
    return info


def _read_manifest(tar: tarfile.TarFile) -> Manifest:
    info = _next_member(tar, MANIFEST)
    if info is None:
        raise Refused(MANIFEST, "missing: the archive is empty")
    text = _read_small(tar, info, MANIFEST_LIMIT)
    digest = _next_member(tar, MANIFEST_HASH)
    if digest is None:
        raise Refused(MANIFEST_HASH, "missing: the archive ends after the manifest")
    recorded = _read_small(tar, digest, 100).decode("ascii", "replace").strip()
    if hashlib.sha256(text).hexdigest() != recorded:
        raise Refused(MANIFEST, "its bytes do not match MANIFEST.sha256: the manifest was altered or damaged")
    try:
        data = json.loads(text.decode("utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Refused(MANIFEST, f"not a garden backup manifest: {str(exc).splitlines()[0]}") from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:   # every field at fault, each named with its value
        from garden.formats.yaml_reader import describe_pydantic_error

        problems = ["field %s: %s" % describe_pydantic_error(e) for e in exc.errors()]
        raise Refused(MANIFEST, "not a garden backup manifest: " + "; ".join(problems)) from None


def _extract(tar: tarfile.TarFile, info: tarfile.TarInfo, expected, target: Path) -> None:
    """One member written below `target`, hashed as it is written."""
    if info.size != expected.size:
        raise Refused(info.name, f"{info.size} bytes, the manifest records {expected.size}")
    path = target / info.name
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    source = tar.extractfile(info)
    written = 0
    with open(path, "xb") as out:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > expected.size:   # never past what the manifest declares
                raise Refused(info.name, f"holds more than the {expected.size} bytes the manifest records")
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != expected.sha256:
        raise Refused(info.name, f"its bytes hash to {digest.hexdigest()}, the manifest records {expected.sha256}")
    os.chmod(path, (expected.mode & 0o755) | 0o400)  # never group- or world-writable, always readable to its owner


def _unpack(archive: Path, target: Path) -> Manifest:
    member, where = MANIFEST, None  # where a failure that names no member of its own happened
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            manifest = _read_manifest(tar)
            expected = {f.path: f for f in manifest.files}
            seen: set[str] = set()
            last = MANIFEST_HASH
            while True:
                member, where = last, f"the member after {shown(last)}"  # a damaged header has no name to give
                info = _next_member(tar)
                if info is None:
                    break
                member, where = info.name, None
                if info.name in seen or info.name not in expected:
                    raise Refused(info.name, "appears twice" if info.name in seen else "not in the manifest")
                _extract(tar, info, expected[info.name], target)
                seen.add(info.name)
                last = info.name
            member, where = last, f"the archive's end, after member {shown(last)}"
            while tar.fileobj.read(CHUNK):  # the gzip trailer: its CRC and length are checked only at the end
                pass
    except Refused:
        raise
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise Refused(member, f"cannot be read, the archive is truncated or damaged ({exc})", where) from None
    except OSError as exc:  # the archive or the temporary folder: unreadable, or a disk full
        raise Refused(member, f"cannot be restored: {exc.strerror or exc}", where) from None
    missing = sorted(expected.keys() - seen)
    if missing:
        raise Refused(missing[0], f"listed in the manifest but not in the archive ({len(missing)} missing)")
    return manifest


@dataclass
class RestoreReport:
    archive: Path
    into: Path
    manifest: Manifest
    verified: bool = False
    built: list[str] = field(default_factory=list)
    matches: list[Any] = field(default_factory=list)   # one CaseMatch per case (garden.evaluation.drill)
    problems: list[str] = field(default_factory=list)

    def exit_code(self) -> int:
        return EXIT_FAILED if self.problems or any(not m.match for m in self.matches) else 0

    def lines(self) -> list[str]:
        out = [f"restored {len(self.manifest.files)} files from {self.archive} into {self.into}; "
               "every hash matches the manifest"]
        if not self.verified:
            return out + [f"not verified (add --verify to run the drill); exit {self.exit_code()}"]
        out += [m.describe() for m in self.matches] + [f"drill: {p}" for p in self.problems]
        differ = sum(not m.match for m in self.matches)
        out.append(f"drill: rebuilt {len(self.built)} story indexes in {self.into / '.garden'}; "
                   f"{len(self.matches)} cases under {self.manifest.pipeline}: {len(self.matches) - differ} match "
                   f"the original, {differ} differ; exit {self.exit_code()}")
        return out

    def to_json(self) -> dict:
        return {"archive": str(self.archive), "into": str(self.into), "files": len(self.manifest.files),
                "hashes_verified": True, "drill": self.verified, "pipeline": self.manifest.pipeline,
                "indexes": self.built, "cases": [m.to_json() for m in self.matches], "problems": self.problems,
                "exit": self.exit_code()}


def _target(into: Path) -> Path:
    """`into`, checked: absent or an empty folder, and not a link."""
    if os.path.islink(into):
        raise GardenError(f"--into {shown(str(into))}: is a symbolic link; restore into a folder of its own")
    if into.exists():
        if not into.is_dir():
            raise GardenError(f"--into {shown(str(into))}: exists and is not a folder")
        if any(into.iterdir()):
            raise GardenError(f"--into {shown(str(into))}: not empty; a restore goes into an empty folder")
    elif not into.parent.is_dir():
        raise GardenError(f"--into {shown(str(into))}: no folder {shown(str(into.parent))} to make it in")
    return into


# what verifies a restored store: (root, pipeline, the verdicts the backup recorded) -> (the
# story indexes rebuilt, one comparison per case); garden.evaluation.drill.run_drill
Drill = Callable[[Path, str, list[dict]], tuple[list[str], list[Any]]]


def restore(archive: str | Path, into: str | Path, drill: Drill | None = None) -> RestoreReport:
    """Restore `archive` into `into` (absent or empty), every hash checked before anything
    lands there; with a `drill`, rebuild the derived data there and run the cases (the
    evaluation runs them: the caller hands the drill in, the store imports nothing of it)."""
    archive, into = Path(archive), _target(Path(os.path.abspath(into)))
    if not archive.is_file():
        raise GardenError(f"{shown(str(archive))}: no such archive file")
    try:
        temp = Path(tempfile.mkdtemp(prefix=f".{into.name}.restore-", dir=into.parent))
    except OSError as exc:
        raise GardenError(f"--into {shown(str(into))}: cannot make a folder beside it: {exc.strerror or exc}") from None
    try:
        manifest = _unpack(archive, temp)
        os.chmod(temp, 0o755)
        os.rename(temp, into)  # replaces an empty folder in one step
    except Refused as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise GardenError(f"{archive}: {exc.where}: {exc.why}; nothing restored") from None
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    report = RestoreReport(archive, into, manifest)
    if drill is not None:
        report.verified = True
        try:
            report.built, report.matches = drill(into, manifest.pipeline, manifest.verdicts)
        except GardenError as exc:
            report.problems = exc.messages
    return report
