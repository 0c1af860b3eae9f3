"""Where a store's two parts live on disk.

The durable part is everything a person made, which nothing can rebuild: `DURABLE` below,
the one definition `garden backup`, `garden restore`, `garden doctor` and the docs' store
page all read. The derived part is the garden home (`.garden/` under the root, unless
`GARDEN_HOME` moves it): indexes, embeddings and traces, deleted and rebuilt at will.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from garden.errors import GardenError
from garden.text import shown

# the store's folder names, named here once
STORY_FOLDER = "fixtures"        # stories and their attachments
REGRESSION = "regression"        # cases that must pass; also the suite's name
CHALLENGE = "challenge"          # known misses, reported; also the suite's name
SUITES = (REGRESSION, CHALLENGE)
CASES_FOLDER = "cases"           # an import's or a generated story's cases, one folder per story
JUDGMENTS_FOLDER = "judgments"   # a person's grades of a trace (garden judge)
# The durable part, folder by folder, with what each holds: the single definition of what
# a backup archives, a restore accepts, the doctor walks and the docs list.
DURABLE = {
    STORY_FOLDER: "the stories and their attachments",
    REGRESSION: "hand-written cases that must pass",
    CHALLENGE: "hand-written and captured cases the pipeline still misses",
    CASES_FOLDER: "the cases `garden generate` and `garden import` write, one folder per story",
    JUDGMENTS_FOLDER: "a person's grades and verdicts of a trace's questions (`garden judge`)",
}
DURABLE_FOLDERS = tuple(DURABLE)
CASE_FOLDERS = (*SUITES, CASES_FOLDER)   # the durable folders holding cases, which a restore drill reruns
HOME_FOLDER = ".garden"


@dataclass(frozen=True)
class StoreLayout:
    root: Path   # as given, made absolute; never resolved, so a linked folder below it still shows as a link
    home: Path

    @classmethod
    def at(cls, root: str | Path | None = None) -> "StoreLayout":
        """The store rooted at `root` (default: the current folder); GardenError unless it is a folder."""
        path = Path(os.path.abspath(root if root is not None else Path.cwd()))
        if not path.is_dir():
            raise GardenError(f"--root {shown(str(path))}: not a folder; a store's root holds fixtures/")
        env = os.environ.get("GARDEN_HOME")
        home = Path(os.path.abspath(env)) if env else path / HOME_FOLDER
        return cls(path, home)

    def durable_folders(self) -> list[Path]:
        return [self.root / name for name in DURABLE_FOLDERS]

    def story_files(self) -> list[Path]:
        """`fixtures/*.yaml`, sorted: the stories `garden check` checks. Nothing is listed
        through a linked `fixtures/` (that link is a finding of its own)."""
        folder = self.root / STORY_FOLDER
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                return []
        except FileNotFoundError:
            return []
        return sorted(p for p in folder.glob("*.yaml") if not p.is_symlink())

    def shown(self, path: Path) -> str:
        """A path as a report names it: relative to the root when below it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def is_derived_store(path: Path) -> bool:
    """Whether the folder `path` is a Milvus Lite store (its `LOCK` file and `collections/`
    folder): derived data, whatever folder it was made in. Backup leaves one out of the
    durable part, and `garden doctor` names it there."""
    try:
        return (stat.S_ISREG(os.lstat(path / "LOCK").st_mode)
                and stat.S_ISDIR(os.lstat(path / "collections").st_mode))
    except OSError:
        return False

