"""What every stage of the structured pipeline reads and writes: one query's context.

A stage is a small object with one required method, ``run(ctx)``, that reads and changes
this context; the pipeline runs its stages in order and builds the packet from what they
leave (see garden/pipelines/structured.py). Candidates enter only through ``admit``, the
one eligibility check, whichever door they come through.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from garden.models import Packet, Record, Sitting, Story
from garden.rerank._span_index import SpanIndex
from garden.rerank.candidates import Candidate
from garden.rerank.eligibility import describe, eligibility
from garden.rerank.query import QuerySpec, Shape
from garden.rerank.resolve import Resolution
from garden.rerank.support import Reference, Verdict
from garden.rerank.timeline import Window
from garden.retrievers import RetrieverBase


@dataclass(frozen=True)
class Setting:
    """One setting a stage reads, declared by that stage: its name, type (int or float),
    default, one line of what it does, and its bounds (`ge`, `gt`, `le`, `lt`; `check`, a
    rule with a message of its own, refusing by ValueError). `Settings`, the resolved
    settings and their defaults are built from these (garden/rerank/stages.py)."""

    name: str
    type: type
    default: float
    about: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    check: Callable[[Any], Any] | None = None


MODES = {
    "decides": "may answer without retrieving (ASK or SKIP)",
    "arms": "sets what a later stage reads; changes no score",
    "retrieves": "brings the base retriever's candidates",
    "moves": "adds score; in a ranking its bonus moves the base order",
    "scores": "adds score, labels, admits or rejects candidates; in a ranking it moves nothing",
    "selects": "chooses the packet from the ranking; a ranking stops before the first one",
}
# how the explorer draws a stage's step (garden/explore/scene.py), by kind: what a stage declares as its `step`
STEPS = {
    "changes": "what it changed, candidate by candidate",
    "decision": "the query's decision and what the query resolved, drawn first, before the baseline",
    "entry": "how many candidates entered and what the eligibility check rejected",
    "spans": "the spans it tested and credited, from its trace",
    "cutoff": "the ratio it armed, said in the step it is shown with",
    "verdict": "the query's support against the store's threshold, from its trace, said in the step it is shown with",
    "lanes": "each lane's ratio, rival and what rides, from its trace",
    "budget": "what was packed, against the budget",
}
# what every stage finds in the context before any stage runs
GIVEN = frozenset({"spec", "settings", "resolution", "retriever", "rerun", "indexes", "reference", "trace"})


class StageBase:
    """One step of the structured pipeline, declared in its class line::

        class Phrase(StageBase, name="phrase", mode="scores", settings=(PHRASE_CEILING,),
                     needs=("candidates",), writes=("candidates",), labels=("phrase_match",),
                     title="Phrase: rare in-order spans of the query"):

    `settings` are the settings it reads, each a `Setting` declared by this stage alone
    (`uses` names any it reads that another stage declares). `reads` are values an
    earlier stage arms (every stage that writes one must come before); `needs` are what
    an earlier stage must have filled (the candidates, the lanes), which later stages may
    add to. `name` is what ablation removes (`default-NAME`); a setting no stage of a
    pipeline uses is refused rather than ignored; `essential` stages cannot be removed;
    `mode` says what it does in a ranking (`MODES`); `labels` and `reasons` are those it
    may give, and `supports` those of its labels that say an item stands on more than
    similarity (an item holding one is not labelled lexical_only or semantic_only);
    `title` is its heading where a query is drawn, `step` the kind of step it is drawn as
    (`STEPS`), `shown_with` the stage whose step draws it too (the explorer draws the stages
    that only arm the lanes or the packing within the lanes' or the pack's step), `armed`
    what that step says of it having run, and `traced` its entry in the trace (its name
    unless given); `drawn` its line in the pipeline's
    diagram (docs/pipeline.md, `garden.rerank.stages.diagram`: what it does, in a sentence;
    the title's words after its colon when not given); `tables` are the whole-store tables it
    reads (garden/derived/tables.py), what a story ingested into Milvus folds and saves
    for it. One method is required:
    `run(ctx)`, which reads and changes the query's context."""

    name: ClassVar[str]
    settings: ClassVar[tuple[Setting, ...]]
    uses: ClassVar[tuple[str, ...]]
    essential: ClassVar[bool]
    mode: ClassVar[str]
    reads: ClassVar[tuple[str, ...]]
    needs: ClassVar[tuple[str, ...]]
    writes: ClassVar[tuple[str, ...]]
    labels: ClassVar[tuple[str, ...]]
    reasons: ClassVar[tuple[str, ...]]
    supports: ClassVar[tuple[str, ...]]
    title: ClassVar[str]
    drawn: ClassVar[str]
    step: ClassVar[str]
    shown_with: ClassVar[str | None]
    armed: ClassVar[str]
    traced: ClassVar[str]
    tables: ClassVar[tuple]

    def __init_subclass__(cls, name: str, settings: tuple[Setting, ...] = (), uses: tuple[str, ...] = (),
                          essential: bool = False, mode: str = "scores", reads: tuple[str, ...] = (),
                          needs: tuple[str, ...] = (), writes: tuple[str, ...] = (), labels: tuple[str, ...] = (),
                          reasons: tuple[str, ...] = (), supports: tuple[str, ...] = (), title: str | None = None,
                          tables: tuple = (), drawn: str | None = None, step: str = "changes",
                          shown_with: str | None = None, armed: str = "", traced: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if mode not in MODES:
            raise TypeError(f"stage {name}: mode must be one of {', '.join(MODES)} (got {mode!r})")
        if step not in STEPS:
            raise TypeError(f"stage {name}: step must be one of {', '.join(STEPS)} (got {step!r})")
        fields = set(QueryContext.__dataclass_fields__)
        unknown = sorted(f for f in (*reads, *needs, *writes) if f not in fields)
        if unknown:
            raise TypeError(f"stage {name}: {', '.join(unknown)} is not a field of the query context")
        cls.settings = tuple(settings)
        cls.name, cls.essential, cls.mode = name, essential, mode
        cls.uses = tuple(s.name for s in settings) + tuple(uses)
        cls.reads, cls.needs, cls.writes = tuple(reads), tuple(needs), tuple(writes)
        if not set(supports) <= set(labels):
            raise TypeError(f"stage {name}: supports names a label it does not give: "
                            f"{', '.join(sorted(set(supports) - set(labels)))}")
        cls.labels, cls.reasons, cls.supports = tuple(labels), tuple(reasons), tuple(supports)
        cls.title = title or name.capitalize()
        cls.drawn = drawn or cls.title.split(": ", 1)[-1]
        cls.step, cls.shown_with, cls.armed, cls.traced = step, shown_with, armed, traced or name
        cls.tables = tuple(tables)

    def run(self, ctx: "QueryContext") -> None:
        raise NotImplementedError

    def prepare(self, indexes, story) -> None:
        """Build what this stage reads besides the base retriever's index (the phrase
        stage: its span index), so a timed run measures queries only. Nothing by default."""


Stage = StageBase  # what a pipeline's stage list holds


class PackRule:
    """What a stage that changes packing arms (`ctx.pack_rules`): the pack stage calls every
    armed rule, in stage order, through these methods, each of which changes nothing by
    default (garden/rerank/pack.py):

    - `widen(ctx, packed, evidence)`: the evidence lane to pack, once the curated lane is
      packed (the provenance stage adds the sources of packed items);
    - `skips_shown`: an evidence item that adds nothing the packet shows is skipped (fill);
    - `instead(ctx, c, packed_ids)`: the item to pack in `c`'s place, or None; the first
      rule that gives one wins, and `shown_through(c, item)` records it (restated);
    - `cut(ctx, c)`: where in `c`'s text the part to pack sits, or None to pack it whole;
      the first rule that gives one wins, and `rides(c, span)` records it (passage);
    - `noted(c, item, span)`: what an `over_budget` rejection adds about the rule's doing.
    """

    skips_shown: bool = False

    def widen(self, ctx: "QueryContext", packed: list[Candidate], evidence: list[Candidate]) -> list[Candidate]:
        return evidence

    def instead(self, ctx: "QueryContext", c: Candidate, packed_ids: set[str]) -> Candidate | None:
        return None

    def shown_through(self, c: Candidate, item: Candidate) -> None:
        """Record that `item` rides in `c`'s place."""

    def cut(self, ctx: "QueryContext", c: Candidate) -> tuple[int, int] | None:
        return None

    def rides(self, c: Candidate, span: tuple[int, int]) -> None:
        """Record that `c` rides as the part `span` of its text."""

    def noted(self, c: Candidate, item: Candidate, span: tuple[int, int] | None) -> str:
        return ""


class StageSettings:
    """Every setting with its value, as the stages read them (`ctx.settings.NAME`): the base
    of the stages' `Resolved` (garden/rerank/stages.py), whose fields are made from the
    settings the stages declare; here so that the context, which the stage list imports, can
    name the type. A setting is an int or a float."""

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> float: ...


class StageIndexes(Protocol):
    """What a stage reads from the index cache the pipeline was given
    (garden/pipelines/indexes.py, `IndexCache`, a layer above): the phrase stage's index."""

    def phrase_index(self, story: Story) -> SpanIndex: ...


class Answered(Protocol):
    """A run of the pipeline, as the session stage reads one (garden/pipelines/scoring.py,
    `Outcome`, a layer above): its packet."""

    packet: Packet


@dataclass
class LaneRules:
    """The lanes' selection (`select_lane`, garden/rerank/standout.py) as the stages before
    the lanes arm it; what none arms keeps the lanes' default: the standout stage's `cutoff`
    (the ratio; 1, off, unarmed), the fill stage's `fill`, the session stage's `floor` (per
    lane, the best score of a delivered item). The decide stage's verdict is its own field
    (`QueryContext.verdict`)."""

    cutoff: float = 1.0
    fill: bool = False
    floor: dict[str, float] = field(default_factory=dict)


# the fields of the context that may hold anything, and why: every other field is typed
# (tests/test_stages.py holds this list)
UNTYPED = {"trace": "what each stage did, for display and the trace log, in each stage's own JSON shape; no stage "
                    "reads it to decide"}


@dataclass
class QueryContext:
    spec: QuerySpec
    settings: StageSettings                          # the stages' `Resolved`: every setting with its value
    resolution: Resolution
    retriever: RetrieverBase                         # the pipeline's indexed base retriever
    rerun: Callable[[QuerySpec], Answered]           # the same pipeline on another query (the session)
    indexes: StageIndexes                            # the IndexCache the pipeline was given
    # the store's reference for the decide stage (garden/pipelines/store_reference.py): made or read
    # when first called (None: a store too small for one); None where the pipeline gives none
    # (a reference's own queries)
    reference: Callable[[], Reference | None] | None = None
    candidates: dict[str, Candidate] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)
    stopped: tuple[str, str, bool, str | None] | None = None   # (decision, reason, fallback, question)
    reason: str = "no triage stage: every query retrieves"
    fallback: bool = False
    calibrated: Reference | None = None              # armed by the calibration stage: the store's reference
    verdict: Verdict | None = None                   # the decide stage's: answer or stay silent, and why
    lane_rules: LaneRules = field(default_factory=LaneRules)
    curated: list[Candidate] = field(default_factory=list)
    evidence: list[Candidate] = field(default_factory=list)
    # the packing rules the selecting stages arm (`PackRule`), in stage order: the pack stage
    # calls each and names none, so a stage that packs holds its own rule
    pack_rules: list[PackRule] = field(default_factory=list)
    packed: list[Candidate] = field(default_factory=list)
    used: int = 0
    window: Window | None = None                     # the time the query names (window.py), counted from as_of
    addressee: str | None = None                     # whose words the query asks for (addressee.py)
    addressed_by: str = ""                           # ... and the query's words that ask it
    unasked: str | None = None                       # the store's own voice, when the query does not ask for it
    sittings: list[Sitting] = field(default_factory=list)   # the sittings ranked (sittings.py), best first
    shape: Shape | None = None                       # the question's shape (shape.py): gathering or pinpoint

    def stop(self, decision: str, reason: str, fallback: bool = False, question: str | None = None) -> None:
        """Answer without retrieving: ASK or SKIP."""
        self.stopped = (decision, reason, fallback, question)

    def admit(self, record: Record, door: str, certain: bool = False) -> Candidate:
        """The one door in: a candidate for `record`, entering through `door` (retriever,
        phrase, supersession, provenance), rejected with its reason if the record may not be
        served for this query. A certain route (an id named in the query, a provenance link)
        skips the soft rules (scope, off-topic), never the hard ones (visibility as of
        `as_of`, privacy, the control plane)."""
        c = self.candidates.get(record.id)
        if c is None:
            c = self.candidates[record.id] = Candidate(record)
        elif c.door is not None and (c.certain or not certain):
            # through the eligibility check already, on a route no less certain: the same verdict again,
            # and its labels are on it (stages admit the records they credit, hundreds a query)
            return c
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


def lend_matches(ctx: QueryContext, relation, share: float, why: str) -> None:
    """Each record that `relation` (a whole-store table: record id -> the ids it lends to)
    names for a lender (`lenders`) borrows `share` of the best own match (its score less what
    it borrowed) among the lenders naming it, given by the neighbour door as
    `structured_context` for `why` (`{by}` the lender, see `give_credit`); a share of 0 lends
    nothing and reads no table. The store's own voice, unasked (addressee.py), is not the
    user's evidence: it neither lends its match nor borrows one. The neighbours and exchange
    stages lend this way."""
    if share <= 0:
        return
    related = relation.of(ctx.spec.story)
    voice = ctx.unasked
    lent: dict[str, tuple[float, str]] = {}
    for c in lenders(ctx):
        if voice is not None and c.record.speaker == voice:
            continue
        own = c.score - c.borrowed
        for rid in related.get(c.id, ()):
            if own > lent.get(rid, (0.0, ""))[0]:
                lent[rid] = (own, c.id)
    if voice is not None:
        speakers = ctx.spec.story.records_of(sorted(lent))  # one read where the records live in Milvus
        lent = {rid: v for rid, v in lent.items() if speakers[rid].speaker != voice}
    give_credit(ctx, {rid: (share * score, by) for rid, (score, by) in lent.items()}, "neighbour",
                "structured_context", why)


def give_credit(ctx: QueryContext, given: dict[str, tuple[float, str]], door: str, label: str, why: str,
                borrowed: bool = False) -> None:
    """Add to each record in `given` (record id -> (its credit, the id of the record it
    comes from)) its credit, in id order, once it passes the eligibility check by `door` on no certain
    route; a record the eligibility check rejects gets nothing. The record is labelled `label`, for the
    reason `why` with `{by}` standing for the lender. With `borrowed`, the credit also counts
    as lent (`Candidate.borrowed`), so a stage that lends only a record's own match never
    passes it on. The cited and neighbours stages give their credit here."""
    records = ctx.spec.story.records_of(sorted(given))  # one read where the records live in Milvus
    for rid in sorted(given):
        amount, by = given[rid]
        c = ctx.admit(records[rid], door)
        if c.reason is not None:
            continue
        c.score += amount
        if borrowed:
            c.borrowed += amount
        c.label(label, why.format(by=by))
