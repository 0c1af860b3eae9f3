"""`garden capture TRACE --query N`: an adjudicated miss becomes a challenge case.

The case asks the traced question exactly (story, as_of, budget, hints, session, settings)
and expects what the verdicts imply, nothing more:

- verdict `answer`: decision retrieve; the one item graded 2 leads, every item graded 1 or 2
  is included;
- verdict `ask`: decision ask;
- verdict `silent`: an empty packet (`max_items: 0`);
- any verdict: every item graded -1 (forbidden) is excluded.

A question that `default` already answers as judged is not a miss, and is refused unless
`force` is given. The case's `origin` names the trace file, its line and its day, and the
judgments it came from. Captured cases have no negative controls yet: the person who fixes
the miss writes them before promoting.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from garden.formats.layout import CHALLENGE
from garden.pipelines.traces import TRACE_NAME
from garden.errors import EXIT_FAILED, GardenError
from garden.evaluation.judgments import Judgments
from garden.evaluation.replay import Replay, find_question, replays_from_trace
from garden.formats.cases import load_case
from garden.formats.stories import resolve_story_path
from garden.text import shown

ID_LIMIT = 48
NAME_LIMIT = 120   # a case id names its file: well under the 255 bytes a file name may have


def case_id(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(words)[:ID_LIMIT].strip("-") or "captured"


def expectations(verdict: str | None, grades: dict[str, int], where: str) -> dict:
    if verdict is None:
        raise GardenError(f"{where}: has no question verdict yet; run `garden judge` on it first")
    forbidden = sorted(r for r, g in grades.items() if g < 0)
    expect: dict = {}
    if verdict == "answer":
        leads = sorted(r for r, g in grades.items() if g == 2)
        relevant = sorted(r for r, g in grades.items() if g >= 1)
        if not relevant:
            raise GardenError(f"{where}: judged 'answer' but no record is graded relevant: "
                              "a case from it would test nothing")
        expect["decision"] = "retrieve"
        if len(leads) == 1:
            expect["lead"] = leads[0]
        expect["include"] = [r for r in relevant if r != expect.get("lead")]
    elif verdict == "ask":
        expect["decision"] = "ask"
    else:
        expect["max_items"] = 0
    if forbidden:
        expect["exclude"] = forbidden
    return {k: v for k, v in expect.items() if v != []}


def story_field(replay: Replay, folder: Path) -> str:
    """The story by name when that name finds the same file from the case's folder, else
    by a path relative to it."""
    target = Path(replay.spec.story_path).resolve()
    try:
        if resolve_story_path(replay.spec.story.name, folder).resolve() == target:
            return replay.spec.story.name
    except GardenError:
        pass
    return Path(os.path.relpath(target, folder.resolve())).as_posix()


def case_data(replay: Replay, judgments: Judgments, name: str, folder: Path) -> dict:
    spec, qid = replay.spec, replay.question_id
    where = f"{judgments.path}: question {qid} ({shown(spec.query)})"
    expect = expectations(judgments.verdict(qid), judgments.qrels.get(qid, {}), where)
    match = TRACE_NAME.fullmatch(replay.trace)
    day = "-".join(match.groups()) if match else "an undated trace"
    asked = f"a run of case {replay.case}" if replay.case else "a free query"
    data = {
        "id": name, "story": story_field(replay, folder),
        "about": f"A miss captured from a trace: {asked}, judged by a person in {judgments.path.name}. "
                 "It has no negative controls yet; write them before promoting.",
        "origin": f"garden capture: {replay.trace} line {replay.line} ({asked}, traced {day}), "
                  f"verdicts in {judgments.path.name}",
        "category": "captured", "as_of": spec.as_of, "budget": spec.budget, "query": spec.query,
    }
    hints = spec.hints.model_dump(mode="json")
    if any(hints.values()):
        data["hints"] = {k: v for k, v in hints.items() if v}
    if spec.include_private:
        data["include_private"] = True
    settings = spec.settings.model_dump(mode="json", exclude_none=True)
    if settings:
        data["settings"] = settings
    if spec.session:
        data["session"] = list(spec.session)
    data["expect"] = expect
    return data


@dataclass
class Captured:
    path: Path
    failures: list[str]   # what `default` got wrong: why this is a miss
    forced: bool


def capture(trace: str | Path, which: str, judgments: str | Path, name: str | None = None,
            out: str | Path = CHALLENGE, force: bool = False, trace_source: str | None = None,
            since=None, until=None) -> Captured:
    """Write the question `which` (its number, qid or exact text, as `replays_from_trace`
    numbers them) of the trace as a challenge case; see the module's docstring."""
    from garden.evaluation.runner import run_case

    trace, folder = Path(trace), Path(out)
    if not trace.exists():
        raise GardenError(f"{trace}: no such trace file or folder")
    store = Judgments.load(judgments, must_exist=True)
    asked = replays_from_trace(trace, trace_source, since=since, until=until, expectations=False)
    replay = find_question(asked, which, trace)
    cid = name if name is not None else case_id(replay.spec.query)
    if not re.fullmatch(r"[a-z0-9_.-]+", cid):
        raise GardenError(f"`name` {shown(cid)}: a case id is lower-case letters, digits, '.', '_' and '-'")
    if len(cid) > NAME_LIMIT:
        raise GardenError(f"`name` {shown(cid)}: a case id is at most {NAME_LIMIT} characters (it names the file; "
                          f"this one has {len(cid)})")
    if folder.exists() and not folder.is_dir():
        raise GardenError(f"`out` {shown(str(folder))}: must be a folder (it is a file)")
    target = folder / f"{cid}.yaml"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GardenError(f"`out` {shown(str(folder))}: cannot make the folder: {exc.strerror or exc}") from None
    text = yaml.safe_dump(case_data(replay, store, cid, folder), sort_keys=False, allow_unicode=True,
                          width=100)
    # run from where it will live, so its story resolves as it will; created exclusively
    # (no case is overwritten) and removed again unless it is kept
    try:
        with open(target, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise GardenError(f"{target}: exists; choose another `name`") from None
    except OSError as exc:
        raise GardenError(f"{target}: cannot write: {exc.strerror or exc}") from None
    kept = False
    try:
        result = run_case(load_case(target), "default", trace=False)
        if result.passed and not force:
            raise GardenError(f"{trace}: question {replay.number} ({replay.question_id}, {shown(replay.spec.query)}): "
                              "default already serves "
                              "what the verdicts ask, so it is not a miss; nothing written (`force` captures "
                              "it anyway)", status=EXIT_FAILED)
        kept = True
    finally:
        if not kept:
            target.unlink(missing_ok=True)
    return Captured(target, result.main.failures, result.passed)
