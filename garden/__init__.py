"""Pinecone garden: contrast cases and pluggable retrievers for experiments in memory retrieval.

The public API for notebooks and scripts is `garden.api`; its functions are re-exported
here, so ``import garden; garden.query(...)`` works as well as ``from garden import api``.
Importing the package loads no retriever, no torch and no sentence-transformers: they load
when a function first runs a pipeline, so listing pipelines or scaffolding a story is quick.

`api.pipelines` is the one name not re-exported: `garden.pipelines` is the subpackage that
holds the pipelines, and the first query imports it, which would replace a function of that
name on the package. Call it as ``garden.api.pipelines()``.
"""
from garden.api import (
    GardenError,
    compare,
    compare_table,
    contrast,
    contrast_report,
    load_story,
    new_story,
    packet_table,
    promote,
    query,
    run_case,
    run_cases,
    run_cases_report,
    trace_files,
)
from garden import api

__all__ = [
    "GardenError",
    "api",
    "compare",
    "compare_table",
    "contrast",
    "contrast_report",
    "load_story",
    "new_story",
    "packet_table",
    "promote",
    "query",
    "run_case",
    "run_cases",
    "run_cases_report",
    "trace_files",
]
