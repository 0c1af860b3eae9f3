"""What a restore drill compares: how the store answers its own cases.

Permissions and hashes show the bytes came back; they do not show that the restored store
answers as the original did. So a backup records each case's verdict and answers (per
query: the decision and the packed ids, in order) under one pipeline, and a drill rebuilds
the derived data in the restored folder, runs the same cases there and compares. Scores are
left out: two machines may differ in the last float bits while packing the same answer.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from garden._terminal import Progress, counted
from garden.errors import GardenError
from garden.formats.layout import CASE_FOLDERS, StoreLayout


def case_files(root: Path) -> list[Path]:
    files = []
    for name in CASE_FOLDERS:
        folder = root / name
        if folder.is_dir() and not folder.is_symlink():
            files += [p for p in folder.rglob("*.yaml") if not p.is_symlink()]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def case_verdicts(root: Path, pipeline: str) -> list[dict]:
    """Each case under `root` run under `pipeline` (no trace written): its path, whether it
    passed, and its answers; a case that does not load is recorded as such, not raised."""
    from garden.derived.cache import stand_in_if_unusable
    from garden.evaluation.runner import run_case
    from garden.formats.cases import load_case
    from garden.pipelines import check_pipeline

    check_pipeline(pipeline)
    stand_in_if_unusable("the cases' verdicts")
    verdicts, stories = [], {}
    files = case_files(root)
    for path in counted(files, Progress(f"running the cases under {pipeline}", total=len(files), unit="cases")):
        name = path.relative_to(root).as_posix()
        try:
            loaded = load_case(path)
        except GardenError as exc:
            verdicts.append({"case": name, "loads": False, "passed": False, "answers": [],
                             "problem": exc.messages[0]})
            continue
        result = run_case(loaded, pipeline, trace=False, stories=stories)
        answers = [{"query": q.name, "decision": (q.packet or {}).get("decision"),
                    "items": [item["id"] for item in (q.packet or {}).get("items", [])]}
                   for q in [result.main, *result.controls]]
        verdicts.append({"case": name, "loads": True, "passed": result.passed, "answers": answers})
    return verdicts


@contextlib.contextmanager
def garden_home(home: Path):
    """GARDEN_HOME pointed at `home` for the duration, then put back as it was."""
    before = os.environ.get("GARDEN_HOME")
    os.environ["GARDEN_HOME"] = str(home)
    try:
        yield home
    finally:
        if before is None:
            os.environ.pop("GARDEN_HOME", None)
        else:
            os.environ["GARDEN_HOME"] = before


@dataclass(frozen=True)
class CaseMatch:
    case: str
    original: dict | None
    restored: dict | None

    @property
    def match(self) -> bool:
        keys = ("loads", "passed", "answers")
        return (self.original is not None and self.restored is not None
                and all(self.original.get(k) == self.restored.get(k) for k in keys))

    def _verdict(self, verdict: dict | None) -> str:
        if verdict is None:
            return "absent"
        if not verdict.get("loads", True):
            return "does not load"
        return "passed" if verdict["passed"] else "failed"

    def describe(self) -> str:
        original, restored = self._verdict(self.original), self._verdict(self.restored)
        if self.match:
            return f"match {self.case}: {restored}, same answers"
        where = ""
        if original == restored and self.original and self.restored:
            differ = [a.get("query") or "the case's own query" for a, b in
                      zip(self.original["answers"], self.restored["answers"]) if a != b]
            where = f"; answers differ at {', '.join(map(str, differ)) or 'the number of queries'}"
        return f"MISMATCH {self.case}: {original} in the original, {restored} restored{where}"

    def to_json(self) -> dict:
        return {"case": self.case, "match": self.match, "original": self._verdict(self.original),
                "restored": self._verdict(self.restored)}


def run_drill(root: Path, pipeline: str, original: list[dict]) -> tuple[list[str], list[CaseMatch]]:
    """Rebuild the derived data of the store at `root` in its own garden home, run its cases
    and compare them with `original`: the rebuilt story indexes, and one CaseMatch per case."""
    from garden.pipelines.indexes import PROCESS_INDEXES
    from garden.formats.stories import build_index

    with garden_home(root / ".garden"):
        PROCESS_INDEXES.clear()  # nothing built from the original may stand in for the restored store
        built = [str(build_index(story)) for story in StoreLayout.at(root).story_files()]
        restored = case_verdicts(root, pipeline)
    before = {v["case"]: v for v in original}
    after = {v["case"]: v for v in restored}
    return built, [CaseMatch(name, before.get(name), after.get(name)) for name in sorted(before.keys() | after.keys())]
