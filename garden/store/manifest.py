"""The manifest a backup carries: every durable file with its sha256, size and mode, and
the cases' verdicts under one pipeline (what a restore drill compares against).

The manifest is the archive's first member, `MANIFEST.json`; its own sha256 is the second,
`MANIFEST.sha256`, so a damaged manifest is named as such rather than blamed on a member.
"""
from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from garden.formats.layout import DURABLE_FOLDERS

MANIFEST, MANIFEST_HASH = "MANIFEST.json", "MANIFEST.sha256"
MANIFEST_LIMIT = 16 << 20  # bytes: a manifest larger than this is not one the garden wrote


def member_problem(name: str) -> str | None:
    """Why `name` cannot be a stored file's path, or None: it must be a plain relative path
    (no `..`, no `.`, no empty part, no backslash or NUL) inside one of the durable folders."""
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return "not a plain relative path"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "not a plain relative path (an empty, '.' or '..' part)"
    if len(parts) < 2 or parts[0] not in DURABLE_FOLDERS:
        return f"outside the durable folders ({', '.join(DURABLE_FOLDERS)})"
    return None


class ManifestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)
    mode: int = Field(ge=0, le=0o777)

    @field_validator("path")
    @classmethod
    def _plain(cls, value: str) -> str:
        problem = member_problem(value)
        if problem:
            raise ValueError(problem)
        return str(PurePosixPath(value))


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["garden-backup"] = "garden-backup"
    version: Literal[1] = 1
    pipeline: str
    files: list[ManifestFile]
    verdicts: list[dict[str, Any]]

    @field_validator("files")
    @classmethod
    def _unique(cls, value: list[ManifestFile]) -> list[ManifestFile]:
        seen = set()
        for f in value:
            if f.path in seen:
                raise ValueError(f"{f.path!r} is listed twice")
            seen.add(f.path)
        return value


def manifest_bytes(manifest: Manifest) -> bytes:
    """The manifest as stored: sorted keys, so the same store always gives the same bytes."""
    return (json.dumps(manifest.model_dump(mode="json"), indent=1, sort_keys=True) + "\n").encode("utf-8")
