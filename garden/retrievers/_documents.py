"""The documents of a story: what every index of it reads.

Each retriever, the phrase index (garden/pipelines/indexes.py) and the decide stage's
vocabulary (garden/rerank/decide.py) read the same list, so it is made once per story
and kept on it. Control records are never indexed: they are stored and validated, never
candidates.
"""
from __future__ import annotations

from garden.models import Story
from garden.retrievers._protocol import Doc


def documents(story: Story) -> tuple[Doc, ...]:
    """What every index of the story indexes, made once per story: every retriever and the
    phrase index read the same list (at 100,000 records, 0.7 s to make)."""
    return story.remembered("documents", lambda s: tuple(Doc(r.id, r.searchable) for r in s.records
                                                          if r.kind != "control"))
