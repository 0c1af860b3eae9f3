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
- `titles` are the headings the explorer draws, and `diagram` the pipeline's diagram
  that opens docs/pipeline.md, each stage's line what it declares (`drawn`);
- `settings_model` builds the settings a case, the command line or the API may give
  (`Settings`), every setting with its value (`Resolved`) and the defaults, from the
  settings the stages declare;
- `labels` and `reasons` are every label and rejection reason a packet may carry: the
  stages' declared ones, the eligibility rules' and the pipeline's own.

`Settings`, `Resolved`, `SETTING_DEFAULTS`, `LABELS` and `REASONS` are made here, once, from
`STAGES`: they live with the stages, above the data model, which imports nothing of them
(docs/layers.md). The models that carry them (a case, a trace event) import them from here.
"""
from __future__ import annotations

import dataclasses
import textwrap
from typing import Any, Sequence

from pydantic import Field, create_model, field_validator

from garden.errors import GardenError
from garden.models import SettingsBase
from garden.rerank.context import GIVEN, Setting, Stage, StageBase, StageSettings
from garden.rerank.eligibility import ELIGIBILITY_LABELS, ELIGIBILITY_REASONS


def stages_named(*names: str) -> list[Stage]:
    """One stage per name, in order: the `StageBase` subclass that module
    `garden.rerank.NAME` defines under that name. A new stage is its module and its name
    in the list below."""
    import importlib

    out = []
    for name in names:
        module = importlib.import_module(f"garden.rerank.{name}")
        found = [cls for cls in vars(module).values()
                 if isinstance(cls, type) and issubclass(cls, StageBase) and cls is not StageBase
                 and cls.__module__ == module.__name__ and cls.name == name]
        if len(found) != 1:
            raise TypeError(f"garden.rerank.{name} must define one stage named {name!r} (found {len(found)})")
        out.append(found[0]())
    return out


STAGES: list[Stage] = stages_named(
    "triage",
    "window",
    "addressee",
    "shape",
    "retrieve",
    "structure",
    "cited",
    "neighbours",
    "exchange",
    "perspective",
    "phrase",
    "spread",
    "gather",
    "sessions",
    "update",
    "supersession",
    "session",
    "sittings",
    "standout",
    "calibration",
    "decide",
    "fill",
    "lanes",
    "provenance",
    "restated",
    "passage",
    "pack",
    "premise",
)
# what the pipeline reads once the stages are done: a packet needs packed items
PACKET_NEEDS = ("packed",)
# what the pipeline itself gives once the stages are done (structured.py, `_packet`)
PIPELINE_LABELS = ("lexical_only", "semantic_only")
PIPELINE_REASONS = ("predecessor_without_successor", "rank_cut")


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


# the diagram's columns: the arrow and the stage's name, what it does (wrapped), its module
DIAGRAM_NAME, DIAGRAM_TEXT = 14, 54


def diagram(stages: Sequence[Stage] = STAGES) -> str:
    """The pipeline's diagram: the query, each stage's name, what it does (its `drawn`) and
    its module, one stage after another, then the packet. docs/pipeline.md shows it,
    made from the list when the site is built (docs/_hooks.py)."""
    rows = ["query + as_of + hints + session"]
    for stage in stages:
        module = type(stage).__module__.replace(".", "/") + ".py"
        lines = textwrap.wrap(stage.drawn, DIAGRAM_TEXT, break_on_hyphens=False) or [""]
        rows.append(f"  -> {stage.name + ' ':<{DIAGRAM_NAME}}{lines[0]:<{DIAGRAM_TEXT}}  {module}")
        rows.extend(" " * (5 + DIAGRAM_NAME) + line for line in lines[1:])
    rows.append(f"  -> {'packet + trace':<{DIAGRAM_NAME + DIAGRAM_TEXT}}  garden/pipelines/traces.py")
    return "\n".join(row.rstrip() for row in rows) + "\n"


def support_labels(stages: Sequence[Stage] = STAGES) -> frozenset[str]:
    """The labels that say an item stands on more than similarity, as the stages declare."""
    return frozenset(label for s in stages for label in s.supports)


def labels(stages: Sequence[Stage] = STAGES) -> tuple[str, ...]:
    """Every label a packet item may carry, in the order first declared: the stages', the
    eligibility rules', the pipeline's."""
    found = [label for s in stages for label in s.labels] + sorted(ELIGIBILITY_LABELS) + list(PIPELINE_LABELS)
    return tuple(dict.fromkeys(found))


def reasons(stages: Sequence[Stage] = STAGES) -> tuple[str, ...]:
    """Every reason a candidate may be rejected for, the eligibility rules' first."""
    found = sorted(ELIGIBILITY_REASONS) + [r for s in stages for r in s.reasons] + list(PIPELINE_REASONS)
    return tuple(dict.fromkeys(found))


def declared_settings(stages: Sequence[Stage] = STAGES) -> list[Setting]:
    """Every stage's settings in stage order; TypeError for a name two stages declare."""
    seen: dict[str, str] = {}
    out: list[Setting] = []
    for stage in stages:
        for setting in stage.settings:
            if setting.name in seen:
                raise TypeError(f"setting {setting.name} is declared by stage {seen[setting.name]} and by "
                                f"stage {stage.name}; one stage declares a setting, others name it in `uses`")
            seen[setting.name] = stage.name
            out.append(setting)
    return out


def settings_model(base: type, stages: Sequence[Stage] = STAGES) -> tuple[type, type, dict[str, Any]]:
    """(Settings, Resolved, SETTING_DEFAULTS) from the stages' declared settings. `Settings`
    subclasses `base` (garden.models.SettingsBase): each field optional (None: the
    default), with the declared bounds and description; `Resolved` is a frozen dataclass
    of every setting with its value; the defaults are the declared ones. `Settings` is
    given both, so that its `resolved()` fills what it leaves unset."""
    declared = declared_settings(stages)
    fields = {s.name: (s.type | None, Field(default=None, ge=s.ge, gt=s.gt, le=s.le, lt=s.lt, description=s.about))
              for s in declared}
    validators = {f"_check_{s.name}": field_validator(s.name, mode="before")(_checked(s.check))
                  for s in declared if s.check is not None}
    model = create_model("Settings", __base__=base, __module__=__name__, __validators__=validators, **fields)
    model.__doc__ = base.__doc__
    resolved = dataclasses.make_dataclass("Resolved", [(s.name, s.type) for s in declared], bases=(StageSettings,),
                                          frozen=True)
    resolved.__module__ = __name__
    resolved.__doc__ = "Every setting with a value: what the stages read."
    defaults = {s.name: s.default for s in declared}
    model.resolved_type, model.defaults = resolved, defaults
    return model, resolved, defaults


def _checked(check):
    def validate(cls, value):
        return value if value is None else check(value)

    return classmethod(validate)


# Read off the stage list once: what a case, the command line or the API may set, and every
# label and reason a packet may carry.
LABELS = labels(STAGES)
REASONS = reasons(STAGES)
Settings, Resolved, SETTING_DEFAULTS = settings_model(SettingsBase, STAGES)


def as_settings(given: SettingsBase) -> Settings:
    """A query's settings (`QuerySpec.settings`: the stages' model, or its empty base when
    none were given) as the stages' model: what a trace event and a case carry."""
    return given if isinstance(given, Settings) else Settings(**given.model_dump(exclude_none=True))


def resolved(given: SettingsBase) -> Resolved:
    """Every setting with its value: those a query gives, the rest their declared defaults.
    The pipeline resolves a query's settings here, so the query need not load the stages."""
    return as_settings(given).resolved()
