"""Pipelines by name: every registered retriever as a bare baseline, and `default`.

A pipeline has one required method, ``run(spec) -> Outcome``. A bare pipeline retrieves and
packs in score order, nothing else: the baseline every contrast is measured against.
`default` is the structured pipeline on `hybrid`, a list of named stages (see
structured.py); `default-phrase` is the same without its phrase stage, and any stage that
is not essential can be removed so by name. `default@RETRIEVER` stands the same stages on
another base retriever, any registered retriever with its options (`default@milvus-hybrid`,
`default-phrase@hybrid:retrievers=bm25s+dense`). Stage settings go between the stages and
the `@`: `default:exchange_share=0.5`, `default-phrase:standout=1.2@bm25s` (variants.py).
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

from garden.errors import GardenError
from garden.rerank.stages import Settings
from garden.pipelines.bare import BarePipeline
from garden.pipelines.scoring import Outcome, scored  # noqa: F401  (public here)
from garden.rerank.query import QuerySpec
from garden.pipelines.variants import misplaced, read_settings, setting_pairs
from garden.retrievers import make_retriever, parse_spec, registered

STRUCTURED = {"default": "hybrid"}


class Pipeline(Protocol):
    name: str
    uses: frozenset[str]   # the settings its stages read

    def run(self, spec: QuerySpec) -> Outcome: ...


def pipeline_names() -> list[str]:
    return sorted(registered()) + sorted(STRUCTURED)


class Structured(NamedTuple):
    base: str                # `default`
    without: frozenset[str]  # the stages removed
    retriever: str           # the base retriever's spec: `hybrid` unless `@` names another
    settings: tuple[tuple[str, str], ...] = ()   # the stage settings the name gives, as written


def split_structured(name: str) -> Structured | None:
    """The parts of `default`, `default-phrase-standout`, `default:standout=1.2` or
    `default@milvus-hybrid`; None for a name that is not a structured pipeline. Everything
    after the first `@` is the base retriever's; the settings sit between the stages and it."""
    stages, at, retriever = name.partition("@")
    stages, colon, given = stages.partition(":")
    base, _, rest = stages.partition("-")
    if base not in STRUCTURED:
        return None
    return Structured(base, frozenset(rest.split("-")) if rest else frozenset(),
                      retriever if at else STRUCTURED[base], setting_pairs(name, given) if colon else ())


def structured_pipeline(name: str, indexes=None):
    """The structured pipeline a checked structured name stands for."""
    from garden.pipelines.structured import StructuredPipeline

    parts = split_structured(name)
    shared = {} if indexes is None else {"indexes": indexes}
    pipeline = StructuredPipeline(name, parts.retriever, parts.without, **shared)
    if parts.settings:
        pipeline.settings = read_settings(name, parts.settings, pipeline.uses)
    return pipeline


def describe_pipelines() -> dict[str, str]:
    from garden.pipelines.structured import STAGES

    out = {name: f"bare: {reg.description}" for name, reg in registered().items()}
    removable = [s.name for s in STAGES if not s.essential]
    for name, base in STRUCTURED.items():
        out[name] = (f"structured pipeline on {base}, stages: {' -> '.join(s.name for s in STAGES)}; "
                     f"{name}-STAGE removes one ({', '.join(removable)}); {name}:SETTING=VALUE sets a "
                     f"stage's setting (before any @); {name}@RETRIEVER stands them on another base retriever")
    return out


def describe_pipeline(name: str) -> str:
    """One line for any pipeline name, options and removed stages included: the line
    `garden pipelines` gives its base, and what the name changes."""
    described = describe_pipelines()
    if name in described:
        return described[name]
    structured = split_structured(name)
    if structured is not None:
        without = f", without {', '.join(sorted(structured.without))}" if structured.without else ""
        settings = f", settings {', '.join(f'{k}={v}' for k, v in structured.settings)}" if structured.settings else ""
        return f"structured pipeline {structured.base} on {structured.retriever}{without}{settings}"
    base, options = parse_spec(name)
    return f"{described.get(base, 'bare')}; options " + ", ".join(f"{k}={v}" for k, v in options.items())


def make_pipeline(name: str, hard_rules: bool = False) -> Pipeline:
    """The pipeline a name stands for. `hard_rules`: a bare pipeline obeys the hard eligibility
    rules as well (privacy, `as_of`, control records, current states), as a served one
    must; a structured pipeline always does."""
    if split_structured(check_pipeline(name)) is not None:
        return structured_pipeline(name)
    return BarePipeline(name, hard_rules=hard_rules)


def baseline_names() -> list[str]:
    """The bare baselines: each built-in retriever that is a column of the contrast matrix
    (`bm25`, `bm25s`, `dense`, `hybrid`, `tfidf`), sorted. Plugins and the retrievers that
    run on another engine are left out: a user names those where wanted."""
    from garden.retrievers._registry import BUILTIN

    return [name for name, reg in registered().items()
            if reg.origin == BUILTIN and getattr(reg.factory, "in_contrast", True) is not False]


def check_pipeline(name: str) -> str:
    """A pipeline name: `default`, `default` without some stages (`default-phrase`), with
    stage settings (`default:standout=1.2`, read as their stages declare them and refused
    when no stage left reads them: variants.py), or a registered retriever with options
    (`bm25:variant=plus`), which are checked by building it once: `make_retriever` reads
    them against the retriever's declared OPTIONS (type, range, finiteness) before the
    constructor runs, so a bad value is one GardenError line before any query runs or any
    trace is written."""
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
        if structured.retriever != STRUCTURED[structured.base]:
            _check_retriever(structured.retriever, f"pipeline {name!r}: no base retriever named", name)
        if structured.settings:
            structured_pipeline(name)   # reads them against the stages it keeps
        return name
    _check_retriever(name, "unknown pipeline")
    return name


def _check_retriever(spec: str, unknown: str, name: str | None = None) -> None:
    base, options = parse_spec(spec)
    if base not in registered():
        raise GardenError(f"{unknown} {base!r}; known: {', '.join(pipeline_names())}")
    if options:
        try:
            make_retriever(spec)
        except GardenError as exc:
            hints = misplaced(name or spec, options)
            raise (GardenError([*exc.messages, *hints]) if hints else exc) from None


def check_settings(pipeline: "str | Pipeline", settings: Settings, where: str = "settings") -> None:
    """Refuse a setting the pipeline (a name, or one already made) has no stage to use: set
    and silently ignored, it would mislead whoever reads the result (`--pipeline bm25
    --standout 2`)."""
    made = make_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    pipeline = made.name
    unused = sorted(settings.given() - made.uses)
    if unused:
        raise GardenError([f"{where}: pipeline {pipeline} has no stage that uses {name!r} "
                           f"(a bare retriever uses no setting; see `garden pipelines`)" for name in unused])


def warm_up(pipeline: Pipeline, spec: QuerySpec, queries: list[str] | None = None) -> None:
    """One untimed run of `spec`, the store's reference made (a structured pipeline's), and
    every model the pipeline's retriever loads on demand loaded (given the `queries` a timing
    will ask, only a model one of them needs): a timing that follows measures the queries
    alone, and a server's first request builds nothing."""
    from garden.retrievers import load_models

    pipeline.run(spec)
    if hasattr(pipeline, "reference"):   # the store's reference, made now even when triage stopped `spec`
        pipeline.reference(spec.story)
    indexes = getattr(pipeline, "indexes", None)
    name = getattr(pipeline, "retriever_name", None) or getattr(pipeline, "name", None)
    if indexes is not None and isinstance(name, str):
        load_models(indexes.retriever(spec.story, name), queries)


def release(story, successor) -> int:
    """Drop what this process built for `story` and keeps by its content (its indexes, its
    store reference), now that `successor` has replaced it, unless the two hold the same
    content: a served story written to is a new version after every write, and a version
    replaced is never asked again, so what was built for it would only hold memory (tens of
    megabytes a version at a hundred thousand records) until the caches' bounds pushed it
    out. How many entries were dropped."""
    from garden.derived.saves import story_key
    from garden.pipelines.indexes import PROCESS_INDEXES
    from garden.pipelines.store_reference import PROCESS_REFERENCES

    key = story_key(story)
    if story_key(successor) == key:
        return 0
    return PROCESS_INDEXES.drop_story(key) + PROCESS_REFERENCES.drop(lambda entry: entry[0] == key)
