"""What every stage of the structured pipeline reads and writes: one query's context.

A stage is a small object with one required method, ``run(ctx)``, that reads and changes
this context; the pipeline runs its stages in order and builds the packet from what they
leave (see garden/pipelines/structured.py). Candidates enter only through ``admit``, the
one eligibility gate, whichever door they come through.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

from garden.models import Record, Resolved
from garden.rerank.candidates import Candidate
from garden.rerank.gate import describe, eligibility
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import Resolution


class Stage(Protocol):
    """One step of the structured pipeline. `name` is what ablation removes (`default-NAME`);
    `uses` names the settings the stage reads, so a setting no stage of a pipeline uses is
    refused rather than ignored; `essential` stages cannot be removed."""

    name: ClassVar[str]
    uses: ClassVar[tuple[str, ...]]
    essential: ClassVar[bool]

    def run(self, ctx: "QueryContext") -> None: ...


class StageBase:
    """Declares a stage in its class line: ``class Phrase(StageBase, name="phrase",
    uses=("phrase_ceiling",))``; `essential` stages cannot be removed."""

    name: ClassVar[str]
    uses: ClassVar[tuple[str, ...]]
    essential: ClassVar[bool]

    def __init_subclass__(cls, name: str, uses: tuple[str, ...] = (), essential: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.name, cls.uses, cls.essential = name, tuple(uses), essential


@dataclass
class QueryContext:
    spec: QuerySpec
    settings: Resolved
    resolution: Resolution
    retriever: Any                                   # the pipeline's indexed base retriever
    rerun: Callable[[QuerySpec], Any]                # the same pipeline on another query (the session)
    indexes: Any                                     # the IndexCache the pipeline was given
    candidates: dict[str, Candidate] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)
    stopped: tuple[str, str, bool, str | None] | None = None   # (decision, reason, fallback, question)
    reason: str = "no triage stage: every query retrieves"
    fallback: bool = False
    cutoff: float = 1.0                              # the standout ratio; 1 until the standout stage arms it
    answers: bool | None = None                      # the decide stage's verdict; None: the lanes' ratio decides
    decisive: float = math.inf                       # with a verdict, a lane whose ratio reaches this answers anyway
    fill: bool = False                               # armed by the fill stage: the scores, not a count, say what rides
    floor: dict[str, float] = field(default_factory=lambda: {"curated": 0.0, "evidence": 0.0})
    curated: list[Candidate] = field(default_factory=list)
    evidence: list[Candidate] = field(default_factory=list)
    follow_sources: Any = None                       # armed by the provenance stage
    packed: list[Candidate] = field(default_factory=list)
    used: int = 0
    window: Any = None                               # the time the query names (window.py), counted from as_of
    addressee: str | None = None                     # whose words the query asks for (addressee.py)
    addressed_by: str = ""                           # ... and the query's words that ask it

    def stop(self, decision: str, reason: str, fallback: bool = False, question: str | None = None) -> None:
        """Answer without retrieving: ASK or SKIP."""
        self.stopped = (decision, reason, fallback, question)

    def admit(self, record: Record, door: str, certain: bool = False) -> Candidate:
        """The one gate: a candidate for `record`, entering through `door` (retriever,
        phrase, supersession, provenance), rejected with its reason if the record may not be
        served for this query. A certain route (an id named in the query, a provenance link)
        skips the soft rules (scope, off-topic), never the hard ones (visibility as of
        `as_of`, privacy, the control plane)."""
        c = self.candidates.get(record.id)
        if c is None:
            c = self.candidates[record.id] = Candidate(record)
        c.certain = c.certain or certain
        verdict = eligibility(record, self.spec, self.resolution, c.certain)
        if verdict is not None:
            c.reject(*verdict)
            c.door = c.door or door
            return c
        c.door = c.door or door
        describe(c, self.spec.as_of)
        return c


def lenders(ctx: QueryContext) -> list[Candidate]:
    """The candidates a stage may pass credit from: the `candidates` best live ones with a
    positive score (the query's own candidate pool), best first, ties by id. Credit from a
    record past the pool is too small to move anything into it, and lending from all of a
    conversation's thousand turns cost more than the rest of the query."""
    from garden.rerank.candidates import by_score

    live = [c for c in ctx.candidates.values() if c.reason is None and c.score > 0]
    return by_score(live)[:ctx.settings.candidates]
