"""The registry of benchmark kinds, and the dispatch `garden compare` and `garden ablate`
go through: recognise the source's kind, check the pipelines and the options against it,
hand the rest to the kind.

A kind is registered by its module's name in KIND_MODULES; the module holds `KIND`, a
`garden.evaluation.kinds.kind.Kind`.
"""
from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Sequence

from garden.errors import GardenError
from garden.evaluation.kinds.kind import Kind, refuse_options

KIND_MODULES = (
    "trace",
    "longmemeval",
    "locomo",
    "collection",
    "cases",
)


@functools.cache
def kinds() -> dict[str, Kind]:
    """name -> Kind, in the order registered."""
    loaded = [importlib.import_module(f"garden.evaluation.kinds.{module}").KIND for module in KIND_MODULES]
    return {kind.name: kind for kind in loaded}


def kind_of(path: str | Path) -> Kind:
    """The one kind `path` is, by the markers of garden/formats/sources.py and those of any
    kind registered with its own; GardenError when none, or more than one."""
    from garden.formats.sources import source_kind

    return kinds()[source_kind(path, {k.name: k.marker for k in kinds().values() if k.marker is not None})]


def check_pipelines(pipelines: Sequence[str], baseline: str | None) -> None:
    """Every name a pipeline or some kind's own reference, the baseline among them."""
    from garden.pipelines import check_pipeline

    if not pipelines:
        raise GardenError("`pipelines` names no pipeline")
    references = {r for kind in kinds().values() for r in kind.references}
    for p in pipelines:
        if p not in references:  # a kind's reference, checked against the source's kind
            check_pipeline(p)
    if baseline is not None and baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")


def refuse_references(kind: Kind, source: str, pipelines: Sequence[str]) -> None:
    for other in kinds().values():
        for p in pipelines:
            if p in other.references and other is not kind:
                raise GardenError(f"pipeline {p!r} is a reference for {other.title} only: {source} is a "
                                  f"{kind.name} source")


def checked(source: str, options: dict) -> tuple[Kind, dict]:
    """The source's kind and the options set (not None), once the kind takes every one."""
    kind = kind_of(source)
    given = {name: value for name, value in options.items() if value is not None}
    refuse_options(kind, source, given, kinds())
    return kind, given


def compare_source(source: str, pipelines: list[str], baseline: str | None = None, **options):
    """`garden compare`: the pipelines on `source`, whatever its kind, with the options its
    kind takes (`plot`, `metrics` and `trec_dir` on every kind); the kind's report."""
    check_pipelines(pipelines, baseline)
    kind, given = checked(source, options)
    refuse_references(kind, source, pipelines)
    return kind.compare(Path(source), list(pipelines), baseline, **given)
