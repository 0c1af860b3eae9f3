"""Pydantic models for everything users and other tools touch: the data model.

Stories are the durable source; packets are what a pipeline hands back. Every model
forbids unknown keys, because a typo in stored data must fail the build rather than be
silently ignored.

This is the lowest layer (docs/layers.md): it imports nothing of the garden. What is
read off the stages' declarations lives with the stages (garden/rerank/stages.py:
`Settings`, `Resolved`, `SETTING_DEFAULTS`, `LABELS`, `REASONS`), and so do the models
that carry them: a case with its expectations (garden/formats/cases.py) and a trace
event (garden/pipelines/traces.py).
"""
from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

Kind = Literal["source", "chunk", "state", "decision", "note", "view", "control"]
Fidelity = Literal["transcript", "snapshot", "hybrid", "summary", "projection"]
Decision = Literal["retrieve", "ask", "skip"]
# What a packet does for its reader, in one word: it answers (items), asks back (decision
# `ask`: which one?), or stays silent (no item; `Packet.silent` says why)
Outcome = Literal["answered", "asked", "silent"]

DEFAULT_FIDELITY = {"source": "transcript", "chunk": "transcript", "state": "projection",
                    "decision": "projection", "view": "projection", "note": "summary",
                    "control": "snapshot"}
ID_PATTERN = r"^[a-z0-9_.-]+$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _whole_characters(cls, value: Any) -> Any:
        # a lone surrogate (a "\ud800" escape in JSON or YAML, a byte a shell passed that is
        # not UTF-8) is no character: no file can hold it and a tokenizer refuses it, so it is
        # refused here, where every story, case and import is validated, with its field
        found = lone_surrogate(value)
        if found is not None:
            raise ValueError(f"holds {found}, which is no Unicode character (a lone surrogate: a byte "
                             "that is not UTF-8, or a \\ud800-\\udfff escape without its pair)")
        return value


SURROGATE = re.compile("[\ud800-\udfff]")   # a lone surrogate: no character, no file can hold it


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in a string, or in the strings of a list, tuple or dict
    (one level: nested models check their own fields), escaped for a message; None when
    there is none."""
    if isinstance(value, str):
        m = SURROGATE.search(value)
        return None if m is None else repr(m.group(0))[1:-1]
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                found = lone_surrogate(item)
                if found is not None:
                    return found
    return None


# --- stories -----------------------------------------------------------------


class Topic(Strict):
    title: str | None = None
    related: list[str] = []
    aliases: list[str] = []


class Entity(Strict):
    name: str | None = None
    aliases: list[str] = []
    project: str | None = None


class Attachment(Strict):
    """A file a record points to, durable and frozen once written: its path relative to the
    story's folder, and the sha256 of its bytes (`garden check` and `garden doctor` verify both)."""

    path: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def empty_list():
    """An empty list by factory, shown as `default: []` in the JSON Schema as `= []` was."""
    return Field(default_factory=list, json_schema_extra={"default": []})


class Record(Strict):
    # lists by factory, not `= []`: pydantic deep-copies a mutable default for every record,
    # which was a third of loading a 100,000-record story
    id: str = Field(pattern=ID_PATTERN)
    kind: Kind
    text: str | None = None
    title: str | None = None
    at: dt.date | None = None
    fidelity: Fidelity | None = None
    topics: list[str] = empty_list()
    entities: list[str] = empty_list()
    speaker: str | None = None  # the entity who said or wrote it: its author, not its subject
    sources: list[str] = empty_list()
    related: list[str] = empty_list()
    project: str | None = None
    private: bool = False
    stability: Literal["temporary", "stable"] | None = None
    status: Literal["active", "superseded"] | None = None
    superseded_by: str | None = None
    observed_at: dt.date | None = None
    valid_from: dt.date | None = None
    valid_to: dt.date | None = None
    last_confirmed_at: dt.date | None = None
    expected_resolution_at: dt.date | None = None
    decided_at: dt.date | None = None
    rationale: str | None = None
    attachments: list[Attachment] = empty_list()  # durable files the record points to, each with its hash

    @property
    def effective_fidelity(self) -> str:
        """The stated fidelity, else the kind's: raw material is a transcript, curated
        state, decisions and derived views are projections, a note is a summary."""
        if self.fidelity:
            return self.fidelity
        return DEFAULT_FIDELITY[self.kind]

    @property
    def appeared_at(self) -> dt.date | None:
        """The earliest date the record is known to exist; before it the record is invisible."""
        if self.observed_at is None and self.decided_at is None:   # most records: asked per candidate per query
            return self.at
        dates = [d for d in (self.at, self.observed_at, self.decided_at) if d is not None]
        return min(dates) if dates else None

    @property
    def body(self) -> str:
        """The text a packet carries: the record's text, and a decision's rationale."""
        if not self.rationale:   # most records; asked of every candidate a packer weighs
            return (self.text or "").strip()
        parts = [self.text or "", f"Rationale: {self.rationale}"]
        return " ".join(p for p in parts if p).strip()

    @property
    def searchable(self) -> str:
        """The text a retriever indexes: title and body."""
        return " ".join(p for p in (self.title or "", self.body) if p).strip()


class Story(Strict):
    story: str
    title: str | None = None
    about: str | None = None
    reviewed_at: dt.date | None = None
    project: str
    # the entity a question's second person means ("what did you suggest?"): the store's own
    # voice, an assistant whose memory this is (garden/rerank/addressee.py)
    addressee: str | None = None
    topics: dict[str, Topic | None] = {}
    entities: dict[str, Entity | None] = {}
    records: list[Record]

    @property
    def name(self) -> str:
        """The story's name: its `story:` key, which names its file (`fixtures/NAME.yaml`)."""
        return self.story

    def record(self, rid: str) -> Record:
        return self.by_id[rid]

    def records_of(self, ids) -> dict[str, Record]:
        """The records `ids` the story holds, by id: read at once where the records live
        elsewhere (a story in Milvus, garden.store.milvus)."""
        by_id = self.by_id
        return {rid: by_id[rid] for rid in ids if rid in by_id}

    def attached(self, retriever, spec: str):
        """`retriever` (made by `spec`) on the index built where the story's records live,
        or None, as here: a story in this process is indexed from its documents. A story
        in Milvus (garden.store.milvus) attaches it to its ingested collections."""
        return None

    def saved_phrase_index(self):
        """The phrase index built where the story's records live, or None, as here: built
        from the documents."""
        return None

    def remembered(self, name: str, build):
        """What `build(story)` derives from this story, built once and kept on it: a
        validated story is never changed, so nothing derived from it goes stale. A story
        read from its save (garden/store/stored.py) reads what the save holds instead of
        building it (`_saved`: name, story, build -> the value)."""
        key = f"_{name}"
        cached = self.__dict__.get(key)
        if cached is None:
            saved = self.__dict__.get("_saved")
            cached = self.__dict__[key] = build(self) if saved is None else saved(name, self, build)
        return cached

    @property
    def by_id(self) -> dict[str, Record]:
        # `remembered`, inlined: millions of lookups in a benchmark's run
        found = self.__dict__.get("_by_id")
        if found is None:
            found = self.remembered("by_id", lambda story: {r.id: r for r in story.records})
        return found

    @property
    def order(self) -> dict[str, int]:
        """Record id -> its place in the story, from 0 (a saved story, or one in Milvus,
        reads it off its tables, never its records)."""
        return self.remembered("record_order", lambda story: {r.id: n for n, r in enumerate(story.records)})

    @property
    def kinds(self) -> dict[str, str]:
        """Record id -> its kind."""
        return self.remembered("kinds", lambda story: {r.id: r.kind for r in story.records})

    @property
    def sizes(self) -> dict[str, int]:
        """Record id -> the characters of its body: what a packet pays for it."""
        return self.remembered("sizes", lambda story: {r.id: len(r.body) for r in story.records})

    def holders(self, field: str) -> dict[str, tuple[str, ...]]:
        """A topic (field "topics") or an entity ("entities") -> the ids of the records that
        are not control records and carry it, in story order: a query's anchors are found
        by lookup, not by a pass over every record."""
        def build(story) -> dict[str, tuple[str, ...]]:
            found: dict[str, list[str]] = {}
            for r in story.records:
                if r.kind != "control":
                    for name in dict.fromkeys(getattr(r, field)):
                        found.setdefault(name, []).append(r.id)
            return {name: tuple(ids) for name, ids in found.items()}
        return self.remembered(f"holders_{field}", build)

    def project_of(self, record: Record) -> str:
        return record.project or self.project

    @property
    def people(self) -> list[list[str]]:
        """The store's speakers in the order they first speak, each as the names it goes by
        (its entity's name first, then its aliases; a speaker with no entity, its id): the
        table the calibration stage registers (garden/rerank/calibration.py), folded here."""
        return self.remembered("people", lambda story: folded(story, People))

    @property
    def latest(self) -> dt.date | None:
        """The latest date the story mentions, or None when it mentions none."""
        return self.remembered("latest_date", _latest) or None


def folded(story: Story, fold):
    """What `fold` (a whole-store table's fold, garden/derived/tables.py) makes of the
    story's records, given in the story's order."""
    made = fold(story)
    for record in story.records:
        made.add(record)
    return made.value()


class People:
    """`Story.people`, folded record by record: the speakers in the order they first speak,
    each named as the story's entities name it."""

    def __init__(self, story: Story):
        self.entities = story.entities
        self.seen: dict[str, None] = {}

    def add(self, record: Record) -> None:
        if record.speaker:
            self.seen.setdefault(record.speaker)

    def value(self) -> list[list[str]]:
        out = []
        for who in self.seen:
            entity = self.entities.get(who)
            names = [entity.name, *entity.aliases] if entity is not None else [who]
            out.append(list(dict.fromkeys(n for n in names if n)))
        return out


def _latest(story: Story):
    """The latest date, or False when the story has none (remembered: None is not kept)."""
    dates = [story.reviewed_at] if story.reviewed_at else []
    for r in story.records:
        dates += [d for d in (r.at, r.observed_at, r.decided_at, r.valid_from, r.last_confirmed_at) if d]
    return max(dates) if dates else False


# --- what a query carries ----------------------------------------------------


class Hints(Strict):
    topics: list[str] = []
    entities: list[str] = []


class SettingsBase(Strict):
    """Pipeline settings a case, the command line or the API may override; None means the
    default the stage that reads it declares. Each field, with its type, bounds, default and
    description, is declared by its stage (garden/rerank/stages.py builds `Settings`)."""

    # NaN and the infinities refused, each with its field ("Input should be a finite
    # number"): without this, .inf passes phrase_weight (no upper bound) and .nan fails a
    # bound with a misleading message (IEEE 754: NaN compares false with everything).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # what the stages' settings model (`Settings`, built by garden/rerank/stages.py) is
    # given when it is made: the dataclass of resolved settings and each setting's default
    resolved_type: ClassVar[type]
    defaults: ClassVar[dict[str, Any]]

    def merged(self, other: "SettingsBase | None") -> "SettingsBase":
        if other is None:
            return self
        data = self.model_dump(exclude_none=True)
        data.update(other.model_dump(exclude_none=True))
        # the empty base (a query that gave none) merged with the stages' model is that model
        return (type(other) if isinstance(other, type(self)) else type(self))(**data)

    def given(self) -> set[str]:
        """The names of the settings this object sets (the rest take their default)."""
        return set(self.model_dump(exclude_none=True))

    def resolved(self):
        """Every setting with its value (a `Resolved`): those given here, the rest their
        declared defaults."""
        return self.resolved_type(**{**self.defaults, **self.model_dump(exclude_none=True)})


DEFAULT_BUDGET = 1200       # packet budget in characters of item text


def check_standout(value: Any) -> float:
    """Refuse anything that is not a ratio of at least 1."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or math.isnan(value) or math.isinf(value) or value < 1:
        raise ValueError(
            f"standout must be a ratio of at least 1 (how many times the best item must beat "
            f"its first held-back rival), not a score; got {value!r}"
        )
    return float(value)


def check_query_text(value: Any) -> Any:
    """A query is words to search for: never blank, and free of control characters (a NUL
    or an escape sequence in a case file is a corruption, not a question)."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("a query must hold at least one non-blank character")
        bad = sorted({ch for ch in value if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r"})
        if bad:
            raise ValueError("a query must not hold control characters (found "
                             + ", ".join(f"U+{ord(ch):04X}" for ch in bad) + ")")
    return value


# --- packets ------------------------------------------------------------


class Passage(BaseModel):
    """Where an item that rides as a passage sits in its record: its text is the record's
    text from `start` to `end` (characters, `end` excluded), of `length` in all. The item's
    id is the whole record's."""

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    length: int = Field(ge=0)


class PacketItem(BaseModel):
    # a score is a finite number: JSON (RFC 8259, section 6) has no NaN or infinity, and
    # pydantic would write either as null, which a reader then refuses
    model_config = ConfigDict(allow_inf_nan=False)

    id: str
    kind: str
    fidelity: str
    labels: list[str]
    score: float
    why: list[str]
    text: str
    at: dt.date | None = None  # the record's date: a "when" question is answered from the packet alone
    superseded_by: str | None = None
    passage: Passage | None = None  # set when the item is a passage of its record (garden/rerank/passage.py)


class Sitting(BaseModel):
    """A sitting the query was answered from, as a result of its own: the records of one
    session (garden/rerank/sittings.py), its place among the store's sittings for this
    query, its score, and the records whose scores made it (`carried_by`, best first)."""

    model_config = ConfigDict(allow_inf_nan=False)  # as PacketItem: JSON has no NaN

    sitting: int = Field(ge=1)   # its number in the story, counted from 1 in the story's order
    rank: int = Field(ge=1)
    score: float
    title: str | None = None
    at: dt.date | None = None
    carried_by: list[str]
    why: list[str]


class Rejection(BaseModel):
    id: str
    reason: str
    detail: str | None = None


class Budget(BaseModel):
    limit: int
    used: int


class Gate(BaseModel):
    """What the decide stage weighed (garden/rerank/decide.py): the query's support, the
    store's level and the threshold it answers at, and where the support falls among the
    store's own reference queries (garden/pipelines/store_reference.py)."""

    model_config = ConfigDict(allow_inf_nan=False)

    support: float
    level: float                      # the store's level (its own, or the global level without a reference)
    threshold: float                  # level + answer_at: the least support this store answers
    answers: bool                     # the support reaches the threshold (a decisive lane answers either way)
    reference: bool                   # the level is the store's own
    known_above: float | None = None  # the share of the store's known-item queries whose support is higher
    foreign_below: float | None = None  # the share of its foreign questions whose support is lower


class Packet(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # as PacketItem: JSON has no NaN

    decision: Decision
    reason: str
    warnings: list[str] = []
    items: list[PacketItem] = []
    rejected: list[Rejection] = []
    budget: Budget
    fallback: bool = False
    gate: Gate | None = None          # set by a pipeline with a decide stage that reached it
    sittings: list[Sitting] = []   # the best sittings, best first (empty when nothing is served)
    # a question that gathers (garden/rerank/shape.py): how many sittings its items stand in; null
    # for a question that points at one thing, and for a pipeline that reads no shape
    gathered: int | None = None

    @computed_field
    @property
    def outcome(self) -> Outcome:
        """answered (the packet holds items), asked (decision `ask`: the reader is to ask the
        user which one was meant) or silent (nothing served; `silent` says why). Worked out
        from the packet, never stored, so it cannot disagree with the items."""
        return "asked" if self.decision == "ask" else "answered" if self.items else "silent"

    @computed_field
    @property
    def silent(self) -> str | None:
        """Why a silent packet holds nothing, one sentence; null unless `outcome` is silent."""
        if self.outcome != "silent":
            return None
        if self.decision == "skip":
            return "Triage decided the query needs no memory, so nothing was searched."
        if not self.rejected:
            return "No record matched the query closely enough to be a candidate, so nothing answers it."
        standout = next((r for r in self.rejected if r.reason == "below_standout" and r.detail), None)
        if standout is not None:
            return f"Nothing stood out as an answer: {standout.detail.rstrip('.')}."
        counts: dict[str, int] = {}
        for r in self.rejected:
            counts[r.reason] = counts.get(r.reason, 0) + 1
        listed = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"Every candidate was rejected ({listed})."

    def ids(self) -> list[str]:
        return [item.id for item in self.items]
