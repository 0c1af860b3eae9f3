"""The addressee stage (garden/rerank/addressee.py): a question about what the store's own
voice said lifts what that voice said, in a story that names it."""
from __future__ import annotations

import pytest

from garden.errors import GardenError
from garden.rerank.stages import SETTING_DEFAULTS
from garden.formats.stories import load_story
from garden.rerank.addressee import addressed_speech
from kiln_lane import FIXTURES, ask


@pytest.mark.parametrize("query, words", [
    ("What did you tell me about the lemon tree?", "you tell"),
    ("What was your suggestion for the mugs?", "your suggestion"),
    ("You recommended a book last spring; what was it?", "You recommended"),
    ("Which of the restaurants you suggested was the cheapest?", "you suggested"),
    ("Remind me of the glaze you had suggested.", "you had suggested"),
    ("What was your first recommendation?", "your first recommendation"),
    ("Can you remind me what I repotted?", None),       # a request now, not what it said
    ("What did I tell you about the lemon tree?", None),
    ("Do you know a good glaze?", None),
    ("What is your name?", None),
    ("What did your sister suggest?", None),
])
def test_what_asks_for_the_addressees_words(query, words):
    assert addressed_speech(query) == words


def _run(story, query, pipeline="default", **settings):
    return ask(query, pipeline, story, standout=1, **settings)


def test_the_addressees_turns_are_lifted_and_only_theirs():
    story = load_story(FIXTURES / "kiln-lane.yaml")
    query = "What did you tell me about the lemon tree?"
    outcome = _run(story, query)
    assert outcome.stages["addressee"]["entity"] == "assistant"
    lifted = outcome.stages["addressee"]["lifted"]
    assert lifted and all(story.by_id[rid].speaker == "assistant" for rid in lifted)
    base = {i.id: i.score for i in _run(story, query, addressed=0).packet.items}
    more = {i.id: i.score for i in _run(story, query, addressed=1).packet.items}
    # Wren's turn gains only through its lifted neighbour: the context share of what it gained
    gained = {rid: more[rid] - base[rid] for rid in ("s2.1", "s2.2")}
    assert gained["s2.2"] > 0
    assert gained["s2.1"] == pytest.approx(SETTING_DEFAULTS["context_share"] * gained["s2.2"], abs=1e-5)
    assert outcome.packet.items[0].id == "s2.2"
    assert _run(story, query, "default-addressee").packet.items[0].id == "s2.1"


def test_a_story_without_an_addressee_is_untouched(tmp_path):
    text = (FIXTURES / "kiln-lane.yaml").read_text(encoding="utf-8").replace(
        "addressee: assistant", "# no addressee")
    (tmp_path / "kiln-lane.yaml").write_text(text, encoding="utf-8")
    story = load_story(tmp_path / "kiln-lane.yaml")
    outcome = _run(story, "What did you tell me about the lemon tree?")
    assert "addressee" not in outcome.stages and outcome.packet.items[0].id == "s2.1"


def test_an_addressee_must_be_an_entity(tmp_path):
    text = (FIXTURES / "kiln-lane.yaml").read_text(encoding="utf-8").replace(
        "addressee: assistant", "addressee: helper")
    (tmp_path / "kiln-lane.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(GardenError, match=r"field addressee: 'helper' is not a canonical entity id"):
        load_story(tmp_path / "kiln-lane.yaml")
