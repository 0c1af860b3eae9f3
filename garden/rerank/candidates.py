"""A candidate on its way through the pipeline, and the evidence it carries."""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from garden.models import PacketItem, Passage, Record

CURATED_KINDS = ("state", "decision")


@dataclass(slots=True)
class Candidate:
    record: Record
    scores: dict[str, float] = field(default_factory=dict)   # each retriever's raw score
    score: float = 0.0                                       # the score the lane ranks by
    labels: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    reason: str | None = None        # rejection reason once rejected
    detail: str | None = None
    certain: bool = False            # reached by an explicit id or a provenance link
    door: str | None = None          # how it entered: retriever, phrase, supersession, provenance
    predecessors: list["Candidate"] = field(default_factory=list)   # ride right behind this one
    successor: "Candidate | None" = None
    borrowed: float = 0.0            # the part of `score` lent by another record (citation credit)
    prior: float = 1.0               # the factor rank priors multiplied `score` by (sessions.py, an unasked
                                     # voice): they order what matched, and are no evidence that it answers
    passage: tuple[int, int] | None = None   # rides as this span of its text (passage.py), else whole
    # the record's id, read thousands of times a query (every sort and every lookup)
    id: str = field(init=False)

    def __post_init__(self) -> None:
        self.id = self.record.id

    @property
    def lane(self) -> str:
        return "curated" if self.record.kind in CURATED_KINDS else "evidence"

    def label(self, name: str, why: str | None = None) -> None:
        if name not in self.labels:
            self.labels.append(name)
        if why and why not in self.why:
            self.why.append(why)

    def reject(self, reason: str, detail: str | None = None) -> None:
        if self.reason is None:
            self.reason, self.detail = reason, detail

    def item(self) -> PacketItem:
        r = self.record
        body, span = r.body, self.passage
        return PacketItem(id=r.id, kind=r.kind, fidelity=r.effective_fidelity, labels=list(self.labels),
                          score=round(self.score, 6), why=list(self.why),
                          text=body if span is None else body[span[0]:span[1]], at=r.at,
                          superseded_by=r.superseded_by if "conflicting_or_superseded" in self.labels else None,
                          passage=None if span is None else Passage(start=span[0], end=span[1], length=len(body)))


def by_score(cands: list[Candidate]) -> list[Candidate]:
    """Best first, ties broken by id. Two stable sorts (by id, then by score descending,
    which keeps equal scores in id order) rather than one on (-score, id) tuples: a query
    sorts its hundreds of candidates dozens of times."""
    ordered = sorted(cands, key=_ID)
    ordered.sort(key=_SCORE, reverse=True)
    return ordered


_ID, _SCORE = attrgetter("id"), attrgetter("score")
