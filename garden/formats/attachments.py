"""Attachments: files a record points to, durable and frozen once written.

A record's `attachments` list names each file by a path relative to the story's folder and
the sha256 of its bytes. An attachment is checked without ever following it out of the
story's folder: a path that is absolute, climbs with `..`, or resolves (through a link)
outside the folder is refused before its bytes are read.
"""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from garden.models import Attachment, Story
from garden.text import shown, shown_id

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """The sha256 of a regular file's bytes; OSError if it is not one. O_NONBLOCK so a FIFO
    in its place cannot hang the read (it is then refused as not a regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or below it (both already resolved)."""
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class AttachmentCheck:
    """What checking one attachment found: `problem` is None when its bytes match."""

    field: str            # "path" or "sha256": the field a problem is located at
    problem: str | None
    location: Path | None  # the file, when the path stays inside the story's folder


def check_attachment(story_dir: Path, attachment: Attachment) -> AttachmentCheck:
    rel = PurePosixPath(attachment.path)
    if rel.is_absolute() or "\\" in attachment.path or "\0" in attachment.path:
        return AttachmentCheck("path", f"{shown(attachment.path)} is not a relative path; an attachment's "
                               "path is relative to the story's folder", None)
    if ".." in rel.parts:
        return AttachmentCheck("path", f"{shown(attachment.path)} leaves the story's folder (it climbs with '..')",
                               None)
    folder = story_dir.resolve()
    target = Path(os.path.realpath(folder / rel))
    if not inside(target, folder):
        return AttachmentCheck("path", f"{shown(attachment.path)} leaves the story's folder (it resolves to "
                               f"{shown(str(target))}, outside {shown(str(folder))})", None)
    location = folder / rel
    try:
        actual = sha256_file(target)
    except FileNotFoundError:
        return AttachmentCheck("path", f"{shown(attachment.path)}: no such file in the story's folder", location)
    except OSError as exc:
        return AttachmentCheck("path", f"{shown(attachment.path)}: cannot read it: {exc.strerror or exc}", location)
    if actual != attachment.sha256:
        return AttachmentCheck("sha256", f"{shown(attachment.path)}: its bytes hash to {actual}, the story "
                               f"records {attachment.sha256}", location)
    return AttachmentCheck("sha256", None, location)


def attachment_errors(story: Story, path: Path) -> list[str]:
    """One located line per attachment whose file is missing, leaves the story's folder, or
    does not match its recorded hash."""
    errors = []
    for record in story.records:
        for n, attachment in enumerate(record.attachments):
            found = check_attachment(path.parent, attachment)
            if found.problem:
                errors.append(f"{path}: record {shown_id(record.id)}: field attachments[{n}].{found.field}: "
                              f"{found.problem}")
    return errors
