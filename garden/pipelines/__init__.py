"""Pipelines by name: every registered retriever as a bare baseline, and `default`.

A pipeline has one required method, ``run(spec) -> Outcome``. A bare pipeline retrieves and
packs in score order, nothing else: the baseline every contrast is measured against.
`default` is the structured pipeline on `hybrid`, a list of named stages (see
structured.py); `default-phrase` is the same without its phrase stage, and any stage that
is not essential can be removed so by name.
"""
from __future__ import annotations

from typing import Protocol

from garden.errors import GardenError
from garden.models import Settings
from garden.pipelines.bare import BarePipeline
from garden.pipelines.scoring import Outcome, scored  # noqa: F401  (public here)
from garden.rerank.query import QuerySpec
from garden.retrievers import make_retriever, parse_spec, registered

STRUCTURED = {"default": "hybrid"}


class Pipeline(Protocol):
    name: str

    def run(self, spec: QuerySpec) -> Outcome: ...


def pipeline_names() -> list[str]:
    return sorted(registered()) + sorted(STRUCTURED)


def split_structured(name: str) -> tuple[str, frozenset[str]] | None:
    """(`default`, the stages removed) for `default` or `default-phrase-standout`; None for
    a name that is not a structured pipeline."""
    base, _, rest = name.partition("-")
    if base not in STRUCTURED:
        return None
    return base, frozenset(rest.split("-")) if rest else frozenset()


def describe_pipelines() -> dict[str, str]:
    from garden.pipelines.structured import STAGES

    out = {name: f"bare: {reg.description}" for name, reg in registered().items()}
    removable = [s.name for s in STAGES if not s.essential]
    for name, base in STRUCTURED.items():
        out[name] = (f"structured pipeline on {base}, stages: {' -> '.join(s.name for s in STAGES)}; "
                     f"{name}-STAGE removes one ({', '.join(removable)})")
    return out


def make_pipeline(name: str) -> Pipeline:
    structured = split_structured(check_pipeline(name))
    if structured is not None:
        from garden.pipelines.structured import StructuredPipeline

        base, without = structured
        return StructuredPipeline(name, STRUCTURED[base], without)
    return BarePipeline(name)


def check_pipeline(name: str) -> str:
    """A pipeline name: `default`, `default` without some stages (`default-phrase`), or a
    registered retriever with options (`bm25:variant=plus`), which are checked by building
    it once: `make_retriever` reads them against the retriever's declared OPTIONS (type,
    range, finiteness) before the constructor runs, so a bad value is one GardenError line
    before any query runs or any trace is written."""
    structured = split_structured(name)
    if structured is not None:
        from garden.pipelines.structured import STAGES

        known = {s.name: s for s in STAGES}
        for stage in sorted(structured[1]):
            if stage not in known:
                raise GardenError(f"pipeline {name!r}: no stage named {stage!r}; removable stages: "
                                  + ", ".join(s.name for s in STAGES if not s.essential))
            if known[stage].essential:
                raise GardenError(f"pipeline {name!r}: the {stage} stage is essential and cannot be removed")
        return name
    base, options = parse_spec(name)
    if base not in registered():
        raise GardenError(f"unknown pipeline {name!r}; known: {', '.join(pipeline_names())}")
    if options:
        make_retriever(name)
    return name


def check_settings(pipeline: str, settings: Settings, where: str = "settings") -> None:
    """Refuse a setting the pipeline has no stage to use: set and silently ignored, it would
    mislead whoever reads the result (`--pipeline bm25 --standout 2`)."""
    unused = sorted(settings.given() - make_pipeline(pipeline).uses)
    if unused:
        raise GardenError([f"{where}: pipeline {pipeline} has no stage that uses {name!r} "
                           f"(a bare retriever uses no setting; see `garden pipelines`)" for name in unused])
