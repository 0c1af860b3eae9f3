"""The retriever protocol and the registry of retrievers by name.

A retriever indexes a set of documents and scores a query against them. Built-in ones
are the public modules of this package, each registering itself when imported, so a new
one is one file; third-party ones are found through the
``garden.retrievers`` entry-point group, so ``pip install some-plugin`` adds a name
without touching the garden. A plugin's entry point names a factory (usually a class)
that takes keyword options and has a one-line ``description``.

Options are declared where they are taken: a factory's ``OPTIONS`` maps each keyword to
its type and range (`number`, `integer`, `boolean`, `choice`, `custom`; see _options.py),
and `make_retriever` reads every option against it before calling the factory. A factory
that declares nothing (a plugin written before declarations) gets its options as
`parse_spec` reads them, with NaN and infinities refused, and a TypeError from it is
turned into one line.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

import numpy as np

from garden.errors import GardenError
# the declaration helpers are public here: a retriever module (or a plugin) imports them from
# garden.retrievers beside `register`
from garden.retrievers._options import Option, boolean, choice, custom, integer, non_finite, number, read_options  # noqa: F401

ENTRY_POINT_GROUP = "garden.retrievers"


class Doc(NamedTuple):
    id: str
    text: str


@runtime_checkable
class Retriever(Protocol):
    """Index documents once, then score queries. Scores are larger-is-better; a document
    with no evidence at all may be left out of the returned mapping."""

    name: str

    def index(self, docs: Sequence[Doc]) -> None: ...

    def score(self, query: str) -> dict[str, float]: ...


@dataclass(frozen=True)
class Registered:
    name: str
    factory: Callable[..., Retriever]
    description: str
    origin: str  # "builtin" or the entry point's distribution
    options: Mapping[str, Option] | None = None  # the factory's OPTIONS; None: declares nothing


_REGISTRY: dict[str, Registered] = {}
_loaded = False


def register(name: str, description: str):
    """Class or function decorator: make a retriever factory available by name."""

    def decorate(factory):
        _REGISTRY[name] = Registered(name, factory, description, "builtin", _declared(factory))
        return factory

    return decorate


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    # every public module of this package is a retriever that registers itself on import
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            factory = ep.load()
        except Exception as exc:  # a broken plugin must not break the garden
            _REGISTRY[ep.name] = Registered(ep.name, _broken(ep.name, exc), f"(failed to load: {exc})", "plugin")
            continue
        description = getattr(factory, "description", None) or (factory.__doc__ or "").strip().splitlines()[0:1]
        if isinstance(description, list):
            description = description[0] if description else "(plugin retriever)"
        dist = getattr(ep, "dist", None)
        origin = f"plugin {dist.name}" if dist is not None else "plugin"
        _REGISTRY[ep.name] = Registered(ep.name, factory, description, origin, _declared(factory))


def _declared(factory) -> Mapping[str, Option] | None:
    options = getattr(factory, "OPTIONS", None)
    if isinstance(options, Mapping) and all(isinstance(o, Option) for o in options.values()):
        return dict(options)
    return None  # absent or not a declaration of ours: the factory checks its own options


def _broken(name, exc):
    def factory(**_):
        raise GardenError(f"retriever {name!r} is registered but failed to load: {exc}")

    return factory


def registered() -> dict[str, Registered]:
    _load_all()
    return dict(sorted(_REGISTRY.items()))


def parse_spec(spec: str) -> tuple[str, dict]:
    """`name` or `name:key=value:key=value` (say `bm25:variant=plus:k1=1.2`), so a variant
    can be named wherever a pipeline name goes. Values read as int, float, true/false, or
    text; a number that is not finite ("nan", "inf", "1e999") stays the text it was, so it
    never becomes a float here (`make_retriever` refuses it)."""
    name, pairs = _spec_text(spec)
    return name, {key: _option_value(raw) for key, raw in pairs.items()}


def _spec_text(spec: str) -> tuple[str, dict[str, str]]:
    """The name and each option's text as written, for a declared option to read by its
    own type and for a refusal to quote."""
    name, *pairs = spec.split(":")
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise GardenError(f"retriever {spec!r}: options are key=value, got {pair!r}")
        if key in options:
            raise GardenError(f"retriever {spec!r}: option {key} is given twice")
        options[key] = raw
    return name, options


def _option_value(raw: str):
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            value = kind(raw)
        except ValueError:
            continue
        return value if math.isfinite(value) else raw
    return raw


def make_retriever(spec: str, **options) -> Retriever:
    """A retriever by registered name, with options from the spec and from keywords
    (keywords win). A factory with declared ``OPTIONS`` gets only values its declaration
    accepts (type, range, finiteness: one line per refused option, all at once). One that
    declares nothing gets the spec's values as `parse_spec` reads them; a non-finite number
    is refused for it too, and its TypeError (an option it does not take) becomes one
    line."""
    name, text = _spec_text(spec)
    known = registered()
    if name not in known:
        raise GardenError(f"unknown retriever {name!r}; known: {', '.join(known)}")
    entry = known[name]
    if entry.options is not None:
        return entry.factory(**read_options(name, entry.options, text, options))
    given: dict[str, Any] = {**{k: _option_value(v) for k, v in text.items()}, **options}
    shown = {**text, **options}
    bad = [f"retriever {name}: option {key} must be a finite number (got {shown[key]!r})"
           for key, value in given.items() if non_finite(value)]
    if bad:
        raise GardenError(bad)
    try:
        return entry.factory(**given)
    except TypeError as exc:
        detail = " ".join(str(exc).split())  # one line, whatever the factory wrote
        raise GardenError(f"retriever {name} does not take those options ({detail})") from None


def check_finite(name: str, scores: dict[str, float]) -> None:
    """GardenError naming `name`, the record and the value if any score is not a finite number."""
    try:
        if all(map(math.isfinite, scores.values())):  # the common case: one pass, no Python loop body
            return
    except TypeError:
        pass  # a value that is not a number at all: found and named below
    for rid, value in scores.items():
        try:
            ok = math.isfinite(value)
        except TypeError:
            ok = False
        if not ok:
            raise GardenError(f"retriever {name}: record {rid} got the score {value!r}, which is not a finite number")


def rank(scores: dict[str, float], k: int | None = None) -> list[tuple[str, float]]:
    """Best first; ties broken by id so every run orders the same way."""
    ordered = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return ordered if k is None else ordered[:k]


def id_order(ids: Sequence[str]) -> np.ndarray:
    """Each id's position in sorted order: the tie-breaker `rank` uses, as an array."""
    order = np.empty(len(ids), dtype=np.int64)
    order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return order


def top_k(scores: np.ndarray, ids: np.ndarray, order: np.ndarray, k: int | None,
          candidates: np.ndarray | None = None) -> list[tuple[str, float]]:
    """`rank` over a score array: best first, ties by id, the same list `rank` gives for
    the dict of `candidates` (every document when None), without sorting all of them in
    Python. Only the scores at or above the k-th best are sorted."""
    if k is not None and k < 0:
        raise GardenError(f"a ranking depth must be 0 or more, got {k}")
    if k == 0:
        return []
    if candidates is None:
        candidates = np.arange(len(scores))
    values = scores[candidates]
    if k is not None and len(candidates) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    best = np.lexsort((order[candidates], -values))[:k]
    return list(zip(ids[candidates[best]].tolist(), values[best].tolist()))
