"""The structured pipeline's stages, in order: the one list (`STAGES`), and what is read
off it.

A stage declares itself in its class line (`garden.rerank.context.StageBase`): its
settings, its mode, the context fields it reads, needs and writes, the labels and reasons
it may give, its title. Everything here is derived from those declarations, so adding a
stage is its module plus one line in `STAGES`:

- `check_order` refuses a list in which a stage would run before what it depends on (one
  line naming both stages), a stage twice, or a list without what the packet needs;
- `packet_stages` and `moved_by` are the modes a ranking reads (a ranking stops before the
  first stage that selects the packet; only the bonuses of stages that move are let
  reorder the base);
- `titles` are the headings the explorer draws;
- `declared_labels` and `declared_reasons` are what the stages may give.
"""
from __future__ import annotations

from typing import Sequence

from garden.errors import GardenError
from garden.rerank.addressee import Addressee
from garden.rerank.cited import Cited
from garden.rerank.context import GIVEN, Stage
from garden.rerank.decide import Decide
from garden.rerank.fill import Fill
from garden.rerank.lanes import Lanes
from garden.rerank.neighbours import Neighbours
from garden.rerank.pack import Pack
from garden.rerank.phrase import Phrase
from garden.rerank.premise import Premise
from garden.rerank.provenance import Provenance
from garden.rerank.retrieve import Retrieve
from garden.rerank.session import Session
from garden.rerank.standout import Standout
from garden.rerank.structure import Structure
from garden.rerank.supersession import Supersession
from garden.rerank.triage import TriageStage
from garden.rerank.update import Update
from garden.rerank.window import TimeWindow

STAGES: list[Stage] = [
    TriageStage(),
    TimeWindow(),
    Addressee(),
    Retrieve(),
    Structure(),
    Cited(),
    Neighbours(),
    Phrase(),
    Update(),
    Supersession(),
    Session(),
    Standout(),
    Decide(),
    Fill(),
    Lanes(),
    Provenance(),
    Pack(),
    Premise(),
]
# what the pipeline reads once the stages are done: a packet needs packed items
PACKET_NEEDS = ("packed",)


def check_order(stages: Sequence[Stage], pipeline: str = "default") -> None:
    """GardenError, one line per problem, for a stage list that cannot run as declared:
    a stage named twice; a stage that needs a field no earlier stage writes (`needs`); a
    stage that reads a value a later stage writes (`reads`: it would read the default and
    silently do nothing, as `standout` placed after `lanes` once did)."""
    problems: list[str] = []
    names = [s.name for s in stages]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"pipeline {pipeline}: stage {name} is listed {names.count(name)} times")
    writers: dict[str, list[int]] = {}
    for i, stage in enumerate(stages):
        for field in stage.writes:
            writers.setdefault(field, []).append(i)
    for i, stage in enumerate(stages):
        for field in stage.needs:
            if field not in GIVEN and not any(j < i for j in writers.get(field, ())):
                problems.append(f"pipeline {pipeline}: stage {stage.name} needs {field}, which no stage before it "
                                f"writes ({_writers(stages, field)})")
        for field in stage.reads:
            for j in writers.get(field, ()):
                if j > i:
                    problems.append(f"pipeline {pipeline}: stage {stage.name} reads {field}, which stage "
                                    f"{stages[j].name} writes after it; put {stages[j].name} before {stage.name}")
    for field in PACKET_NEEDS:
        if not writers.get(field):
            problems.append(f"pipeline {pipeline}: no stage writes {field}, which the packet is made of "
                            f"({_writers(STAGES, field)})")
    if problems:
        raise GardenError(problems)


def _writers(stages: Sequence[Stage], field: str) -> str:
    found = [s.name for s in stages if field in s.writes] or [s.name for s in STAGES if field in s.writes]
    return "written by " + ", ".join(found) if found else "no stage writes it"


def packet_stages(stages: Sequence[Stage] = STAGES) -> frozenset[str]:
    """The stages that only select a packet from a ranking: a ranking stops before the first."""
    return frozenset(s.name for s in stages if s.mode == "selects")


def moved_by(stages: Sequence[Stage] = STAGES) -> tuple[str, ...]:
    """The stages whose bonus may move a ranking's base order."""
    return tuple(s.name for s in stages if s.mode == "moves")


def titles(stages: Sequence[Stage] = STAGES) -> dict[str, str]:
    return {s.name: s.title for s in stages}


def declared_labels(stages: Sequence[Stage] = STAGES) -> set[str]:
    return {label for s in stages for label in s.labels}


def declared_reasons(stages: Sequence[Stage] = STAGES) -> set[str]:
    return {reason for s in stages for reason in s.reasons}
