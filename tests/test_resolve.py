"""Scoped resolution: topics by id and alias, entities by whole alias, related topics, hints."""
from __future__ import annotations

import pytest

from garden.models import Hints, Story
from garden.rerank.resolve import Resolution, mentions, resolve


@pytest.fixture
def story() -> Story:
    return Story.model_validate({
        "story": "tiny",
        "project": "aurora-ridge",
        "topics": {
            "gaming": {"aliases": ["games", "video games"]},
            "field_test": {"related": ["logistics", "camp_jokes"], "aliases": ["field test"]},
            "logistics": {"related": ["food"], "aliases": ["supplies"]},
            "camp_jokes": None,
            "food": {},
        },
        "entities": {
            "mira": {"name": "Mira Solberg", "aliases": ["mira"]},
            "observatory_captain": {"name": "Observatory captain", "aliases": ["observatory captain"],
                                    "project": "aurora-ridge"},
            "ship_captain": {"aliases": ["ship captain"], "project": "northwind-crossing"},
        },
        "records": [
            {"id": "decision.tablet", "kind": "decision", "text": "t"},
            {"id": "chat.0103", "kind": "source", "text": "c"},
            {"id": "chat.01", "kind": "source", "text": "c"},
        ],
    })


def test_mentions_is_whole_phrase_on_word_boundaries():
    assert mentions("I miss video games lately", "video games")
    assert mentions("VIDEO   Games!", "video games")
    assert mentions("how did the field test go?", "field_test")
    assert not mentions("videogames", "video games")
    assert not mentions("gamesroom", "games")
    assert not mentions("pregames", "games")
    assert not mentions("video-games", "games")
    assert not mentions("anything", "   ")


def test_a_topic_resolves_by_its_id(story):
    res = resolve(story, "anything new on gaming?")
    assert res.topics == {"gaming": 1.0}
    assert res.topic_why["gaming"] == "topic gaming named as 'gaming'"


def test_an_id_with_underscores_reads_as_words(story):
    res = resolve(story, "how did the field test go?")
    assert res.topics["field_test"] == 1.0


def test_a_topic_resolves_by_alias_on_word_boundaries(story):
    assert resolve(story, "Why have I not played video games?").topics == {"gaming": 1.0}
    assert resolve(story, "the gamesroom is cold").topics == {}
    assert resolve(story, "endgames").topics == {}


def test_related_topics_count_one_hop_out_with_the_decay(story):
    res = resolve(story, "the field test", related_decay=0.25)
    assert res.topics == {"field_test": 1.0, "logistics": 0.25, "camp_jokes": 0.25}
    assert "food" not in res.topics          # two hops out
    assert res.topic_why["logistics"] == "topic logistics related to field_test (decay 0.25)"


def test_a_directly_named_topic_keeps_full_weight_even_if_also_related(story):
    res = resolve(story, "field test supplies")
    assert res.topics["field_test"] == 1.0
    assert res.topics["logistics"] == 1.0
    assert res.topics["food"] == 0.5         # one hop from logistics
    assert res.topics["camp_jokes"] == 0.5


def test_an_entity_resolves_only_by_a_whole_alias(story):
    res = resolve(story, "what did the observatory captain decide?")
    assert res.entities == {"observatory_captain": "entity observatory_captain named as 'observatory captain'"}
    assert resolve(story, "what did the captain decide?").entities == {}
    assert resolve(story, "the observatory decided").entities == {}


def test_an_entity_resolves_by_its_name(story):
    assert "mira" in resolve(story, "has Mira Solberg slept?").entities
    assert "mira" in resolve(story, "has mira slept?").entities
    assert resolve(story, "admiration").entities == {}


def test_projects_come_from_resolved_entities(story):
    assert resolve(story, "the ship captain said").projects == {"northwind-crossing"}
    assert resolve(story, "the observatory captain said").projects == {"aurora-ridge"}
    assert resolve(story, "mira said").projects == {"aurora-ridge"}       # the story's project
    assert resolve(story, "the captain said").projects == set()
    assert resolve(story, "mira and the ship captain").projects == {"aurora-ridge", "northwind-crossing"}


def test_canonical_hints_resolve_without_warnings(story):
    res = resolve(story, "anything?", Hints(topics=["food"], entities=["ship_captain"]))
    assert res.topics == {"food": 1.0}
    assert res.topic_why["food"] == "topic food from a hint"
    assert res.entities == {"ship_captain": "entity ship_captain from a hint"}
    assert res.projects == {"northwind-crossing"}
    assert res.warnings == []


def test_an_unknown_hint_is_a_warning_not_an_error(story):
    res = resolve(story, "what about the field test?", Hints(topics=["feild_test"], entities=["captain"]))
    assert res.topics["field_test"] == 1.0
    assert "feild_test" not in res.topics and "captain" not in res.entities
    assert len(res.warnings) == 2
    assert "hint topic 'feild_test' is not a canonical topic id" in res.warnings[0]
    assert "field_test" in res.warnings[0]           # the known ids are listed
    assert "hint entity 'captain' is not a canonical entity id" in res.warnings[1]


def test_an_alias_as_a_hint_is_not_a_canonical_id(story):
    res = resolve(story, "anything?", Hints(topics=["games"]))
    assert res.topics == {}
    assert "'games'" in res.warnings[0]


def test_explicit_record_ids(story):
    res = resolve(story, "show me decision.tablet and chat.0103 please")
    assert res.explicit_ids == ["chat.0103", "decision.tablet"]
    assert res.anchored


def test_an_explicit_id_must_be_whole(story):
    assert resolve(story, "show me chat.0103").explicit_ids == ["chat.0103"]     # not chat.01
    assert resolve(story, "show me xchat.01").explicit_ids == []
    assert resolve(story, "show me chat.01.").explicit_ids == ["chat.01"]        # sentence-ending dot


def test_nothing_resolved_is_not_anchored(story):
    res = resolve(story, "why did we change it?")
    assert res == Resolution()
    assert not res.anchored


def test_a_bare_head_shared_by_two_entities_is_ambiguous(story):
    assert resolve(story, "What did the captain decide?").ambiguous == {
        "captain": ["observatory_captain", "ship_captain"]}


def test_a_named_entity_is_not_ambiguous(story):
    res = resolve(story, "What did the ship captain decide?")
    assert res.entities and res.ambiguous == {}


def test_a_word_that_heads_no_shared_alias_is_not_ambiguous(story):
    assert resolve(story, "What did the test decide?").ambiguous == {}
    assert resolve(story, "Where is the captaincy log?").ambiguous == {}
