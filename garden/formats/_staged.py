"""An import's stories and cases, written aside and then moved into place.

An importer writes every story and its cases into a staging folder inside the output
folder first (`staging_folder`), so a failure part way leaves nothing half-written where a
user looks; then `move_staged` moves each story and its cases folder into `fixtures/` and
`cases/`, replacing what an earlier import wrote there (a renamed file or folder replaces
the old one in one step on POSIX).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from garden.formats.layout import CASES_FOLDER, STORY_FOLDER

# a story found by name before this form: removed when this form is written (stories.py
# looks a name up as NAME.yaml, then NAME.yml, then NAME.jsonl)
SHADOWED_BY = {".jsonl": (".yaml", ".yml")}


def staging_folder(out: Path, label: str) -> Path:
    """A fresh staging folder inside `out`, named after the import and the process."""
    return Path(tempfile.mkdtemp(prefix=f".{label}-import-{os.getpid()}-", dir=out))


def move_staged(out: Path, staging: Path, names: list[str], suffix: str) -> list[Path]:
    """Move each staged story (`fixtures/NAME{suffix}`) and its cases folder (`cases/NAME`)
    into `out`, replacing an earlier import's; the paths written, story then cases."""
    written: list[Path] = []
    if not names:
        return written
    (out / STORY_FOLDER).mkdir(exist_ok=True)
    (out / CASES_FOLDER).mkdir(exist_ok=True)
    for name in names:
        story = out / STORY_FOLDER / f"{name}{suffix}"
        os.replace(staging / STORY_FOLDER / f"{name}{suffix}", story)
        for other in SHADOWED_BY.get(suffix, ()):
            stale = story.with_suffix(other)
            if stale.is_symlink() or stale.is_file():
                stale.unlink()
        target = out / CASES_FOLDER / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            os.replace(target, staging / f"old-{name}")
        os.replace(staging / CASES_FOLDER / name, target)
        written += [story, target]
    return written
