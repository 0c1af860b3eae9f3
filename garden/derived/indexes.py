"""What a story's retrieval needs, built once per process: retrievers and the phrase index.

An `IndexCache` holds them, keyed by the story's content (so an edited story is rebuilt)
and, for retrievers, by the garden home (a retriever built against one home's embedding
cache must not stand in for another's). It keeps at most `bound` entries, dropping the
least recently used. Its lifetime is the object's: `PROCESS_INDEXES` is the one the
command line and the API share for a process; a caller that wants fresh indexes (promotion,
a benchmark's cold run) passes its own or calls `clear()`. Control records are never
indexed: they are stored and validated, never candidates.
"""
from __future__ import annotations

import hashlib
import json
from garden.derived.home import derived_dir
from garden.models import Story
from garden.rerank.phrase import PhraseIndex
from garden.retrievers import Doc, ProcessCache, Retriever, make_retriever


def story_key(story: Story) -> str:
    """sha256 of the story's validated content: the key of everything derived from it."""
    return story.remembered("key", lambda s: hashlib.sha256(
        json.dumps(s.model_dump(mode="json"), sort_keys=True).encode()).hexdigest())


def documents(story: Story) -> list[Doc]:
    return [Doc(r.id, r.searchable) for r in story.records if r.kind != "control"]


class IndexCache:
    def __init__(self, bound: int = 64):
        self._entries: ProcessCache = ProcessCache(bound)

    def retriever(self, story: Story, name: str) -> Retriever:
        def build():
            retriever = make_retriever(name)
            retriever.index(documents(story))
            return retriever

        return self._entries.get(("retriever", story_key(story), name, str(derived_dir())), build)

    def phrase_index(self, story: Story) -> PhraseIndex:
        return self._entries.get(("phrase", story_key(story)),
                                 lambda: PhraseIndex({d.id: d.text for d in documents(story)}))

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


PROCESS_INDEXES = IndexCache()
