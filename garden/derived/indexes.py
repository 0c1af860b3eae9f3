"""In-process cache of what a story's retrieval needs: documents, retrievers, phrase spans.

All of it is derived from the validated story and rebuilt whenever the story changes.
Control records are never indexed: they are stored and validated, never candidates.
"""
from __future__ import annotations

import hashlib
import json

from garden.models import Story
from garden.derived.home import derived_dir
from garden.rerank.phrase import PhraseIndex
from garden.retrievers import Doc, Retriever, make_retriever

_CACHE: dict[tuple, object] = {}


def story_key(story: Story) -> str:
    cached = story.__dict__.get("_key")
    if cached is None:
        blob = json.dumps(story.model_dump(mode="json"), sort_keys=True).encode()
        cached = hashlib.sha256(blob).hexdigest()
        story.__dict__["_key"] = cached
    return cached


def documents(story: Story) -> list[Doc]:
    return [Doc(r.id, r.searchable) for r in story.records if r.kind != "control"]


def retriever_for(story: Story, name: str) -> Retriever:
    # keyed by the garden home too: a retriever built in one home must not stand in for
    # the derived data (the embedding cache) of another
    key = ("retriever", story_key(story), name, str(derived_dir()))
    if key not in _CACHE:
        retriever = make_retriever(name)
        retriever.index(documents(story))
        _CACHE[key] = retriever
    return _CACHE[key]


def phrase_index_for(story: Story) -> PhraseIndex:
    key = ("phrase", story_key(story))
    if key not in _CACHE:
        _CACHE[key] = PhraseIndex({d.id: d.text for d in documents(story)})
    return _CACHE[key]
