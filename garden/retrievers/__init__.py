"""Retrievers: the protocol, the registry by name, and the normalization pipelines share.

A retriever indexes a set of documents and scores a query against them. Every one has a
`name`, a `kind` (`lexical`, `semantic` or `fusion`), `index(docs)` and `score(query)`,
and the declared capabilities of `RetrieverBase` (`score_many`, `top`, `top_many`,
`members`, `components`, `fuse`, `ceiling`; see _protocol.py), so no caller probes a
retriever with hasattr.

Built-in retrievers are the public modules of this package, each factory marked with
`register` (which registers nothing by itself: the registry reads the marks when it loads
the package), so a new one is one file; third-party ones are found through the
``garden.retrievers`` entry-point group, so ``pip install some-plugin`` adds a name
without touching the garden. A plugin's entry point names a factory (usually a class)
that takes keyword options and has a one-line ``description``; what it makes needs only
`name`, `index` and `score` (and may declare ``kind = "semantic"``): `make_retriever`
wraps it in a `PluginRetriever` that supplies the rest.

Options are declared where they are taken: a factory's ``OPTIONS`` maps each keyword to
its type and range (`number`, `integer`, `boolean`, `choice`, `custom`; see _options.py),
and `make_retriever` reads every option against it before calling the factory. A factory
that declares nothing (a plugin written before declarations) gets its options as
`parse_spec` reads them, with NaN and infinities refused, and a TypeError from it is
turned into one line.

`registry` is the process's `Registry`; `registered` and `make_retriever` are its
`entries` and `make` under the names callers have always used. Tests change it only
through `registry.scoped()` and `registry.temporarily(name, factory)`.
"""
from __future__ import annotations

# the declaration helpers are public here: a retriever module (or a plugin) imports them from
# garden.retrievers beside `register`
from garden.retrievers._options import Option, boolean, choice, custom, integer, non_finite, number, read_options  # noqa: F401
from garden.retrievers._protocol import (  # noqa: F401
    FUSION, KINDS, LEXICAL, NEVER, PLUGIN_KINDS, SEMANTIC, BasicRetriever, Doc, Eligible, PluginRetriever,
    RecordFields, Retriever, RetrieverBase, as_retriever, load_models,
)
from garden.retrievers._cache import ProcessCache  # noqa: F401
from garden._state import State  # noqa: F401  (what a retriever's `state` gives)
from garden.retrievers._registry import Registered, Registry, builtin, declared_options, describe  # noqa: F401
from garden.retrievers._relevance import (  # noqa: F401
    LEXICAL_ONLY, SEMANTIC_ONLY, check_floor, evidence_kind, is_semantic, lexical_relevance, relevance,
    semantic_relevance,
)
from garden.retrievers._scores import (  # noqa: F401
    ArrayScores, DocIds, check_depth, check_finite, column, id_order, member_scores, rank, top_k,
)
from garden.retrievers._spec import option_value, parse_spec, spec_text  # noqa: F401
from garden.retrievers._scored import scored  # noqa: F401
from garden.retrievers._documents import documents  # noqa: F401

ENTRY_POINT_GROUP = "garden.retrievers"

registry = Registry(__name__, ENTRY_POINT_GROUP)


def register(name: str, description: str):
    """Class or function decorator of a built-in retriever module: marks the factory as the
    retriever `name` (see `builtin`); the registry registers it when it loads the package."""
    return builtin(name, description)


def registered() -> dict[str, Registered]:
    """Every registered retriever by name, sorted (built-ins and plugins)."""
    return registry.entries()


def make_retriever(spec: str, **options) -> RetrieverBase:
    """A retriever by registered name, with options from the spec and from keywords
    (keywords win); see `Registry.make`."""
    return registry.make(spec, **options)
