"""Variants by name: a structured pipeline's stage settings written into its name.

    default[-STAGE...][:SETTING=VALUE...][@RETRIEVER[:OPTION=VALUE...]]

`default:exchange_share=0.5`, `default-phrase:standout=1.2:lane_cap=4`,
`default:exchange_share=0.5@bm25s:k1=1.2`. The settings come after the stages removed
and before `@`, so everything after `@` stays the base retriever's, as it always was:
`default@bm25s:k1=1.2` gives bm25s an option and sets no stage's setting. No name valid
before settings could be named had a colon before its `@`, so each keeps its meaning.

A variant's settings are the defaults its queries run with. What a query or a case gives
explicitly wins over them (a case's settings belong to its design), as it wins over a
stage's declared default. Each is read as the stage declared it (a whole number or a
finite number, within its bounds), and a setting no stage of the pipeline uses (one of a
stage the name removes, or none at all) is refused: one line per problem, naming the
pipeline and the setting, before any query runs.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import re

from garden.errors import GardenError
from garden.models import SettingsBase
from garden.rerank.context import Setting
from garden.rerank.query import QuerySpec
from garden.rerank.stages import STAGES, Settings, declared_settings

_WHOLE = re.compile(r"[+-]?\d+", re.ASCII)
DECLARED: dict[str, Setting] = {s.name: s for s in declared_settings(STAGES)}


def setting_pairs(name: str, text: str) -> tuple[tuple[str, str], ...]:
    """The `SETTING=VALUE` pairs of the text between a structured name's stages and its
    `@` (`exchange_share=0.5:standout=1.2`), each value as written."""
    pairs: dict[str, str] = {}
    for pair in text.split(":"):
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise GardenError(f"pipeline {name!r}: a setting is written NAME=VALUE, got {pair!r}")
        if key in pairs:
            raise GardenError(f"pipeline {name!r}: setting {key} is given twice")
        pairs[key] = value
    return tuple(pairs.items())


def _bounds(setting: Setting) -> str:
    """The words after "must be": its kind and the bounds it declares."""
    kind = "a whole number" if setting.type is int else "a finite number"
    if setting.ge is not None and setting.le is not None:
        return f"{kind} from {setting.ge:g} to {setting.le:g}"
    low = f">= {setting.ge:g}" if setting.ge is not None else f"> {setting.gt:g}" if setting.gt is not None else ""
    high = f"<= {setting.le:g}" if setting.le is not None else f"< {setting.lt:g}" if setting.lt is not None else ""
    return " ".join([kind, " and ".join(b for b in (low, high) if b)]).strip()


def _value(setting: Setting, text: str) -> int | float:
    """`text` read as the setting's declared type; ValueError when it is not one."""
    if setting.type is int:
        if not _WHOLE.fullmatch(text):
            raise ValueError("not a whole number")
        return int(text)
    value = float(text)   # reads "nan", "inf" and "1e999" too: refused just below
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def read_settings(name: str, pairs: tuple[tuple[str, str], ...], uses: frozenset[str]) -> Settings:
    """The settings a variant's name gives, read as their stages declare them; `uses` are
    the settings the pipeline's stages read. GardenError, one line per problem."""
    from pydantic import ValidationError

    problems: list[str] = []
    values: dict[str, int | float] = {}
    for key, text in pairs:
        setting = DECLARED.get(key)
        if setting is None:
            near = difflib.get_close_matches(key, DECLARED, n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            problems.append(f"pipeline {name!r}: no stage declares a setting named {key!r}; {hint}"
                            "docs/pipeline.md lists every setting")
            continue
        if key not in uses:
            readers = ", ".join(s.name for s in STAGES if key in s.uses)
            problems.append(f"pipeline {name!r}: no stage of it uses {key} (read by {readers}, which the "
                            "name removes)")
            continue
        try:
            values[key] = Settings(**{key: _value(setting, text)}).model_dump()[key]
        except ValidationError as exc:
            if setting.check is None:
                problems.append(f"pipeline {name!r}: setting {key} must be {_bounds(setting)} (got {text!r})")
            else:   # a setting with a rule of its own (standout) says what it wants in its own words
                own = exc.errors()[0]["msg"].removeprefix("Value error, ")
                problems.append(f"pipeline {name!r}: setting {key}: {own}")
        except ValueError:
            problems.append(f"pipeline {name!r}: setting {key} must be {_bounds(setting)} (got {text!r})")
    if problems:
        raise GardenError(problems)
    return Settings(**values)


def misplaced(name: str, options) -> list[str]:
    """A line for each of a retriever's `options` that is a stage's setting instead: a
    setting goes before the `@`, and a bare retriever has no stage to read one."""
    return [f"pipeline {name!r}: {key} is a stage setting, not an option of the retriever; a structured "
            f"pipeline takes it before its @ (default:{key}=VALUE@RETRIEVER), a bare one not at all"
            for key in options if key in DECLARED]


def with_settings(spec: QuerySpec, settings: SettingsBase) -> QuerySpec:
    """`spec` with a variant's `settings` beneath its own: what the query gives wins."""
    if not settings.given():
        return spec
    return dataclasses.replace(spec, settings=settings.merged(spec.settings))


def without_stage(name: str, stage: str) -> str:
    """The structured pipeline `name` with `stage` removed too; its settings that no stage
    left reads are dropped (an ablation of `default:exchange_share=0.5` removes exchange,
    and with it the setting only exchange reads). The base retriever stays as named."""
    head, at, retriever = name.partition("@")
    stages, colon, given = head.partition(":")
    removed = {stage, *stages.split("-")[1:]}
    uses = {u for s in STAGES if s.name not in removed for u in s.uses}
    kept = ":".join(f"{k}={v}" for k, v in (setting_pairs(name, given) if colon else ()) if k in uses)
    return f"{stages}-{stage}" + (f":{kept}" if kept else "") + (f"@{retriever}" if at else "")
