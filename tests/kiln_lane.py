"""The Kiln Lane chats (fixtures/kiln-lane.yaml) asked on the date its cases are asked,
shared by the tests of the stages it proves: window, addressee and update."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from garden.formats.stories import load_story
from garden.models import Story
from garden.rerank.stages import Settings
from garden.pipelines import make_pipeline
from garden.rerank.query import QuerySpec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORY = FIXTURES / "kiln-lane.yaml"
AS_OF = dt.date(2032, 3, 29)          # a Monday


def ask(query: str, pipeline: str = "default", story: Story | None = None, **settings):
    """The pipeline's outcome (packet and stage trace) for `query` on the story as of AS_OF."""
    story = story if story is not None else load_story(STORY)
    return make_pipeline(pipeline).run(QuerySpec(story, query, AS_OF, settings=Settings(**settings)))
