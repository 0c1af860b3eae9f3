"""Pipelines by name: every registered retriever as a bare baseline, and `default`.

A pipeline has one required method, ``run(spec) -> Outcome``. A bare pipeline retrieves and
packs in score order, nothing else: the baseline every contrast is measured against.
`default` is the structured pipeline on `hybrid` (see structured.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from garden.derived import indexes as _index
from garden.rerank.candidates import Candidate
from garden.errors import GardenError
from garden.models import Budget, Packet
from garden.rerank.pack import pack
from garden.rerank.query import QuerySpec
from garden.retrievers import check_finite, make_retriever, parse_spec, rank, registered

STRUCTURED = {"default": "hybrid"}


@dataclass
class Outcome:
    packet: Packet
    stages: dict = field(default_factory=dict)
    timings_ms: dict = field(default_factory=dict)


class Pipeline(Protocol):
    name: str

    def run(self, spec: QuerySpec) -> Outcome: ...


def component_scores(retriever, query: str) -> dict[str, dict[str, float]]:
    """Each member retriever's raw scores; a plain retriever is its own only member."""
    if hasattr(retriever, "components"):
        return retriever.components(query)
    return {retriever.name: retriever.score(query)}


def scored(retriever, query: str, name: str | None = None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(the retriever's scores, each member's scores), every member scored once: a fusing
    retriever fuses the members' scores instead of scoring them all again.

    Every pipeline's retrieval passes here, so here every score is checked to be a finite
    number, members first, then the fused ones. A NaN or an infinity (a plugin's bug, or
    options pushed until a float overflows) is refused: a GardenError naming the
    retriever (`name`, the pipeline's spec, else the retriever's own name), the record and
    the value. It is not dropped, because a dropped record looks like an honest miss in
    every metric; and it cannot be kept, because IEEE 754 NaN compares false with
    everything (ranking, the standout ratio and packing would misorder in silence) and
    JSON (RFC 8259, section 6) cannot carry it into a packet or a trace."""
    # numpy's overflow and invalid-value warnings would be extra stderr lines beside the
    # one refusal below, which names the record; the check below is what catches them
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        members = component_scores(retriever, query)
    if not hasattr(retriever, "fuse"):
        fused = members[retriever.name]
        check_finite(name or retriever.name, fused)
        return fused, members
    for member, scores in members.items():
        check_finite(member, scores)
    fused = retriever.fuse(members)
    check_finite(name or retriever.name, fused)
    return fused, members


def evidence_label(scores: dict[str, float]) -> str:
    lexical = any(v > 0 for k, v in scores.items() if parse_spec(k)[0] != "dense")
    return "lexical_only" if lexical else "semantic_only"


class BarePipeline:
    """Retrieve with one retriever, then pack in score order within the budget."""

    def __init__(self, retriever: str):
        self.name = retriever

    def run(self, spec: QuerySpec) -> Outcome:
        t0 = time.perf_counter()
        retriever = _index.retriever_for(spec.story, self.name)
        scores, members = scored(retriever, spec.query, self.name)
        t1 = time.perf_counter()
        cands = []
        for rid, score in rank(scores):
            if score <= 0:
                continue
            c = Candidate(spec.story.by_id[rid], {k: v.get(rid, 0.0) for k, v in members.items()}, score)
            c.label(evidence_label(c.scores), f"{self.name} score {score:.4f}")
            cands.append(c)
        packed, used = pack(cands, spec.budget)
        t2 = time.perf_counter()
        packet = Packet(decision="retrieve", reason=f"bare {self.name}: always retrieves", warnings=[],
                        items=[c.item() for c in packed],
                        rejected=[{"id": c.id, "reason": c.reason, "detail": c.detail} for c in cands if c.reason],
                        budget=Budget(limit=spec.budget, used=used))
        stages = {"candidates": [{"id": c.id, "scores": c.scores} for c in cands]}
        return Outcome(packet, stages, {"retrieve": (t1 - t0) * 1e3, "pack": (t2 - t1) * 1e3})


def pipeline_names() -> list[str]:
    return sorted(registered()) + sorted(STRUCTURED)


def describe_pipelines() -> dict[str, str]:
    out = {name: f"bare: {reg.description}" for name, reg in registered().items()}
    for name, base in STRUCTURED.items():
        out[name] = (f"structured pipeline on {base}: triage, scoped topics and entities, time, "
                     "supersession, provenance, phrase contiguity, standout per lane, budgeted packing")
    return out


def make_pipeline(name: str) -> Pipeline:
    if name in STRUCTURED:
        from garden.pipelines.structured import StructuredPipeline

        return StructuredPipeline(name, STRUCTURED[name])
    check_pipeline(name)
    return BarePipeline(name)


def check_pipeline(name: str) -> str:
    """A pipeline name: `default`, or a registered retriever with options
    (`bm25:variant=plus`), which are checked by building it once: `make_retriever` reads
    them against the retriever's declared OPTIONS (type, range, finiteness) before the
    constructor runs, so a bad value is one GardenError line before any query runs or
    any trace is written."""
    if name in STRUCTURED:
        return name
    base, options = parse_spec(name)
    if base not in registered():
        raise GardenError(f"unknown pipeline {name!r}; known: {', '.join(pipeline_names())}")
    if options:
        make_retriever(name)
    return name
