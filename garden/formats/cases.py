"""Cases: the case model, loading, inheritance of controls, and checking every expectation kind.

A case is only meaningful with its negative controls. Each control inherits the case's
story, query, as_of, budget, hints, include_private, settings and session unless it sets
its own. Every failed expectation is one specific sentence.

The case model lives here rather than in garden.models: a case's settings and the labels
and reasons it may expect are read off the stages' declarations (garden/rerank/stages.py),
which sit above the data model (docs/layers.md).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from pydantic import Field, field_validator, model_validator

from garden.formats.layout import CASES_FOLDER, SUITES
from garden.formats.yaml_reader import read_yaml, validated
from garden.text import shown
from garden.errors import GardenError, StoryError
from garden.models import (DEFAULT_BUDGET, ID_PATTERN, Decision, Fidelity, Hints, Packet, Story, Strict,
                           check_query_text)
from garden.rerank.query import QuerySpec
from garden.rerank.stages import LABELS, REASONS, Settings
from garden.formats.stories import load_story, resolve_story_path


# --- the case model ----------------------------------------------------------------

# the expectations that hold only of an item in the packet: none can accompany `unanswerable`
ITEM_EXPECTATIONS = ("lead", "include", "sequence", "before", "labels", "fidelity", "shows")


class Expect(Strict):
    decision: Decision | None = None
    lead: str | None = None
    include: list[str] = []
    exclude: list[str] = []
    sequence: list[str] = []
    before: list[tuple[str, str]] = []
    labels: dict[str, list[str]] = {}
    absent_labels: dict[str, list[str]] = {}
    rejected: dict[str, str] = {}
    max_items: int | None = Field(default=None, ge=0)
    fidelity: dict[str, Fidelity] = {}   # in the packet, reporting this fidelity
    shows: dict[str, list[str]] = {}     # in the packet, its text holding each of these (a passage's words)
    warnings: list[str] = []
    build_error: list[str] = []
    # no record of the story answers the question: the right packet holds no item
    unanswerable: bool = False

    def record_ids(self) -> list[tuple[str, str]]:
        """(field, id) for every record this expectation names."""
        out: list[tuple[str, str]] = []
        if self.lead:
            out.append(("lead", self.lead))
        for name in ("include", "exclude", "sequence"):
            out += [(name, rid) for rid in getattr(self, name)]
        out += [("before", rid) for pair in self.before for rid in pair]
        for name in ("labels", "absent_labels", "rejected", "fidelity", "shows"):
            out += [(name, rid) for rid in getattr(self, name)]
        return out

    @field_validator("labels", "absent_labels")
    @classmethod
    def _known_labels(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for rid, labels in value.items():
            for label in labels:
                if label not in LABELS:
                    raise ValueError(f"unknown label {label!r} for {rid}")
        return value

    @field_validator("rejected")
    @classmethod
    def _known_reasons(cls, value: dict[str, str]) -> dict[str, str]:
        for rid, reason in value.items():
            if reason not in REASONS:
                raise ValueError(f"unknown rejection reason {reason!r} for {rid}")
        return value

    @model_validator(mode="after")
    def _unanswerable_needs_no_item(self) -> "Expect":
        if self.unanswerable:
            clash = [name for name in ITEM_EXPECTATIONS if getattr(self, name)]
            if clash:
                named = clash[0] if len(clash) == 1 else f"{', '.join(clash[:-1])} and {clash[-1]}"
                raise ValueError(
                    f"unanswerable: true says no record answers the question, so the packet holds no "
                    f"item; it cannot be combined with {named}, which {'needs' if len(clash) == 1 else 'need'} "
                    "an item in the packet")
        return self


class QueryFields(Strict):
    """The fields a control inherits from its case unless it sets its own."""

    story: str | None = None
    query: str | None = None
    as_of: dt.date | None = None
    budget: int | None = Field(default=None, ge=1)
    hints: Hints | None = None
    include_private: bool | None = None
    settings: Settings | None = None
    session: list[str] | None = None

    _query_text = field_validator("query")(classmethod(lambda cls, v: check_query_text(v)))
    _session_text = field_validator("session")(classmethod(lambda cls, v: [check_query_text(q) for q in v or []]
                                                           if v is not None else v))


class Control(QueryFields):
    name: str
    expect: Expect = Expect()


class Case(Strict):
    id: str = Field(pattern=ID_PATTERN)
    story: str
    about: str | None = None
    origin: str | None = None
    category: str | None = None
    as_of: dt.date
    budget: int = Field(default=DEFAULT_BUDGET, ge=1)
    query: str
    hints: Hints = Hints()
    include_private: bool = False
    settings: Settings = Field(default_factory=lambda: Settings())
    session: list[str] = []
    expect: Expect = Expect()
    controls: list[Control] = []

    _query_text = field_validator("query")(classmethod(lambda cls, v: check_query_text(v)))
    _session_text = field_validator("session")(classmethod(lambda cls, v: [check_query_text(q) for q in v or []]
                                                           if v is not None else v))


# --- loading -----------------------------------------------------------------------




@dataclass
class Query:
    """One runnable query of a case: the case itself or one of its controls."""

    name: str | None              # None for the case itself
    story_path: Path
    spec_fields: dict
    expect: Expect


@dataclass
class LoadedCase:
    case: Case
    path: Path
    suite: str
    queries: list[Query]

    @property
    def id(self) -> str:
        return self.case.id


def suite_of(path: Path) -> str:
    for part in reversed(path.resolve().parts[:-1]):
        if part in SUITES:
            return part
    return CASES_FOLDER


INHERITED = ("query", "as_of", "budget", "hints", "include_private", "settings", "session")


def load_case(path: str | Path, stories_held: Mapping[Path, Story] | None = None) -> LoadedCase:
    """Validate a case file and everything it names; raise GardenError (exit 2) listing
    every problem found: the schema's, the id's, each query's story and each record an
    expectation names, across the case and all its controls. A story the caller already
    holds (`stories_held`, by its file's path) is checked as held, its file not parsed
    again."""
    path = Path(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise GardenError(f"{path}: a case must be a mapping (value {shown(raw)})")
    case = validated(Case, raw, str(path))
    problems: list[str] = []
    if case.id != path.stem:
        problems.append(f"{path}: field id: must equal the file stem {shown(path.stem)} (value {shown(case.id)})")
    base = {name: getattr(case, name) for name in INHERITED}
    queries: list[Query] = []
    stories: dict[str, Path | None] = {}
    for n, control in enumerate([None, *case.controls]):
        fields = dict(base)
        if control is None:
            story, where, expect, name = case.story, "story", case.expect, None
        else:
            for field_name in INHERITED:
                value = getattr(control, field_name)
                if value is not None:
                    fields[field_name] = value
            story = control.story or case.story
            where = f"controls[{n - 1}] ({_name(control.name)}).story"
            expect, name = control.expect, control.name
        if story not in stories:
            try:
                stories[story] = resolve_story_path(story, path.parent)
            except GardenError as exc:
                stories[story] = None
                problems.append(f"{path}: field {where}: {exc.messages[0]}")
        if stories[story] is not None:
            queries.append(Query(name, stories[story], fields, expect))
    loaded_stories: dict[Path, Story | None] = {Path(p).resolve(): held for p, held in (stories_held or {}).items()}
    for q in queries:
        problems += _named_record_problems(path, q, loaded_stories)
    if problems:
        raise GardenError(problems)
    return LoadedCase(case, path, suite_of(path), queries)


def _name(name: str) -> str:
    """A control's name as written when it prints on one line, escaped and cut otherwise."""
    return name if name.isprintable() and len(name) <= 80 else shown(name)


def _named_record_problems(path: Path, q: Query, loaded: dict) -> list[str]:
    """Every record an expectation names that its story lacks; a story that does not
    build is one problem, reported once per case."""
    if q.expect.build_error:
        return []
    key = q.story_path.resolve()
    if key not in loaded:
        try:
            loaded[key] = load_story(q.story_path)
        except GardenError as exc:
            loaded[key] = None
            return [f"{path}: story {q.story_path} does not build: {exc.messages[0]}"]
    story = loaded[key]
    if story is None:
        return []
    where = f"control {shown(q.name)}: " if q.name else ""
    return [f"{path}: {where}field expect.{fld}: {shown(rid)} names no record in story {story.name}"
            for fld, rid in q.expect.record_ids() if rid not in story.by_id]


def spec_for(q: Query, story: Story) -> QuerySpec:
    f = q.spec_fields
    return QuerySpec(story=story, query=f["query"], as_of=f["as_of"], budget=f["budget"], hints=f["hints"],
                     include_private=f["include_private"], settings=f["settings"], session=list(f["session"]),
                     story_path=str(q.story_path))


# --- expectations --------------------------------------------------------------

UNANSWERABLE_SHOWN = 3  # ids an unanswerable case's failure names of the packet it got


def check(expect: Expect, packet: Packet, story: Story, include_private: bool) -> list[str]:
    """Every failed expectation, one sentence each; the two always-on checks included."""
    ids = packet.ids()
    items = {item.id: item for item in packet.items}
    rejected = {r.id: r.reason for r in packet.rejected}
    failures: list[str] = []

    def where(rid: str) -> str:
        return f"rejected as {rejected[rid]}" if rid in rejected else "not a candidate"

    if expect.build_error:
        failures.append(f"build_error: expected story {story.name} to fail to build naming "
                        f"{', '.join(expect.build_error)}, but it built")
    if expect.decision and packet.decision != expect.decision:
        failures.append(f"decision: expected {expect.decision}, got {packet.decision} ({packet.reason})")
    if expect.unanswerable and ids:
        shown_ids = ", ".join(ids[:UNANSWERABLE_SHOWN]) + (", ..." if len(ids) > UNANSWERABLE_SHOWN else "")
        failures.append(f"unanswerable: nothing in the store answers this question, but the packet holds "
                        f"{len(ids)} item{'s' if len(ids) != 1 else ''} ({shown_ids})")
    if expect.lead and (not ids or ids[0] != expect.lead):
        got = ids[0] if ids else "an empty packet"
        extra = f"; {expect.lead} {where(expect.lead)}" if expect.lead not in items else ""
        failures.append(f"lead: expected {expect.lead}, got {got}{extra}")
    for rid in expect.include:
        if rid not in items:
            failures.append(f"include: {rid} is not in the packet ({where(rid)})")
    for rid in expect.exclude:
        if rid in items:
            failures.append(f"exclude: {rid} is in the packet at position {ids.index(rid) + 1}")
    if expect.sequence:
        seq = expect.sequence
        missing = [rid for rid in seq if rid not in items]
        if missing:
            places = "; ".join(where(m) for m in missing)
            failures.append(f"sequence: {', '.join(missing)} not in the packet ({places})")
        else:
            start = ids.index(seq[0])
            if ids[start:start + len(seq)] != seq:
                failures.append(f"sequence: expected {' -> '.join(seq)} consecutive, got {' -> '.join(ids)}")
    for a, b in expect.before:
        if a not in items or b not in items:
            absent = [x for x in (a, b) if x not in items]
            failures.append(f"before: {', '.join(absent)} not in the packet, so {a} cannot be ahead of {b}")
        elif ids.index(a) > ids.index(b):
            failures.append(f"before: expected {a} ahead of {b}, "
                            f"got {b} at {ids.index(b) + 1} and {a} at {ids.index(a) + 1}")
    for rid, labels in expect.labels.items():
        if rid not in items:
            failures.append(f"labels: {rid} is not in the packet ({where(rid)}), so it carries no labels")
            continue
        for label in labels:
            if label not in items[rid].labels:
                failures.append(f"labels: {rid} lacks {label} (has {', '.join(items[rid].labels) or 'none'})")
    for rid, labels in expect.absent_labels.items():
        for label in labels:
            if rid in items and label in items[rid].labels:
                failures.append(f"absent_labels: {rid} carries {label} ({'; '.join(items[rid].why)})")
    for rid, reason in expect.rejected.items():
        if rid in items:
            failures.append(f"rejected: expected {rid} rejected as {reason}, but it is in the packet")
        elif rejected.get(rid) != reason:
            failures.append(f"rejected: expected {rid} rejected as {reason}, got {where(rid)}")
    for rid, fidelity in expect.fidelity.items():
        if rid not in items:
            failures.append(f"fidelity: {rid} is not in the packet ({where(rid)})")
        elif items[rid].fidelity != fidelity:
            failures.append(f"fidelity: expected {rid} reported as {fidelity}, got {items[rid].fidelity}")
    for rid, words in expect.shows.items():
        if rid not in items:
            failures.append(f"shows: {rid} is not in the packet ({where(rid)})")
        for needle in words if rid in items else ():
            if needle not in items[rid].text:
                failures.append(f"shows: {rid}'s text in the packet lacks {needle!r}")
    if expect.max_items is not None and len(ids) > expect.max_items:
        failures.append(f"max_items: expected at most {expect.max_items} items, got {len(ids)}")
    for needle in expect.warnings:
        if not any(needle in w for w in packet.warnings):
            failures.append(f"warnings: no warning mentions {needle!r} (warnings: {packet.warnings or 'none'})")
    for item in packet.items:
        record = story.by_id.get(item.id)
        if record is not None and record.private and not include_private:
            failures.append(f"privacy: private record {item.id} is in a packet whose query did not allow it")
        if record is not None and record.kind == "control":
            failures.append(f"control plane: control record {item.id} is in the packet")
    return failures


def check_build_error(expect: Expect, error: StoryError | None, story_path: Path) -> list[str]:
    """For a story that failed to build: the failure must name every expected substring."""
    if error is None:
        return []
    if not expect.build_error:
        return [f"story {story_path} failed to build: {error.messages[0]}"]
    failures = []
    for needle in expect.build_error:
        if not any(needle in line for line in error.messages):
            failures.append(f"build_error: no build error names {needle!r} (errors: {' | '.join(error.messages)})")
    return failures
