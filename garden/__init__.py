"""Pinecone garden: contrast cases and pluggable retrievers for experiments in memory retrieval.

The public API for notebooks and scripts is `garden.api`; its functions are re-exported
here, so ``import garden; garden.query(...)`` works as well as ``from garden import api``.
Importing the package loads no retriever, no torch and no sentence-transformers: they load
when a function first runs a pipeline, so listing pipelines or scaffolding a story is quick.

`api.pipelines` is the one name not re-exported: `garden.pipelines` is the subpackage that
holds the pipelines, and the first query imports it, which would replace a function of that
name on the package. Call it as ``garden.api.pipelines()``.
"""
from garden import api
from garden.api import *  # noqa: F401,F403  the API's names, listed once in api.__all__

__all__ = ["api", *api.__all__]
