"""Cases: loading with located errors, control inheritance, and every expectation kind."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from garden.formats.cases import check, check_build_error, load_case, spec_for, suite_of
from garden.errors import GardenError, StoryError
from garden.models import Budget, Hints, Packet, PacketItem, Rejection
from garden.formats.cases import Expect
from garden.rerank.stages import Settings
from garden.formats.stories import load_story

STORY = {
    "story": "tiny",
    "project": "tiny",
    "topics": {"gaming": {}},
    "records": [
        {"id": "a", "kind": "state", "text": "alpha", "observed_at": "2030-01-01"},
        {"id": "b", "kind": "decision", "text": "bravo", "decided_at": "2030-01-01"},
        {"id": "c", "kind": "note", "text": "charlie", "at": "2030-01-01"},
        {"id": "d", "kind": "source", "text": "delta", "at": "2030-01-01"},
        {"id": "secret", "kind": "note", "text": "hush", "at": "2030-01-01", "private": True},
        {"id": "manifest", "kind": "control"},
    ],
}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A project folder with fixtures/tiny.yaml and an empty regression/ folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "tiny.yaml").write_text(yaml.safe_dump(STORY, sort_keys=False), encoding="utf-8")
    (tmp_path / "regression").mkdir()
    return tmp_path


def case_data(cid: str = "c1", **fields) -> dict:
    data = {"id": cid, "story": "tiny", "as_of": "2030-01-06", "query": "what about alpha?"}
    data.update(fields)
    return data


def write_case(world: Path, data: dict, stem: str | None = None, folder: str = "regression") -> Path:
    path = world / folder / f"{stem or data['id']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load_error(path: Path) -> GardenError:
    with pytest.raises(GardenError) as info:
        load_case(path)
    assert info.value.status == 2
    assert not isinstance(info.value, StoryError)
    return info.value


# --- loading --------------------------------------------------------------------


def test_a_valid_case_loads_with_its_suite_and_queries(world):
    path = write_case(world, case_data(controls=[{"name": "other words", "query": "bravo?"}]))
    loaded = load_case(path)
    assert loaded.id == "c1"
    assert loaded.suite == "regression"
    assert [q.name for q in loaded.queries] == [None, "other words"]
    assert loaded.queries[0].story_path.resolve() == (world / "fixtures" / "tiny.yaml").resolve()


def test_suite_of_reads_the_folder():
    assert suite_of(Path("/x/challenge/deep/case.yaml")) == "challenge"
    assert suite_of(Path("/x/regression/case.yaml")) == "regression"
    assert suite_of(Path("/x/elsewhere/case.yaml")) == "cases"


def test_unknown_key_at_top_level(world):
    path = write_case(world, case_data(qeury="typo"))
    err = load_error(path)
    assert str(path) in str(err) and "field qeury: unknown field" in str(err)


def test_unknown_key_in_expect(world):
    path = write_case(world, case_data(expect={"lead": "a", "leed": "b"}))
    err = load_error(path)
    assert str(path) in str(err) and "field expect.leed: unknown field" in str(err) and "'b'" in str(err)


def test_unknown_key_in_a_control(world):
    path = write_case(world, case_data(controls=[{"name": "x", "as-of": "2030-01-01"}]))
    err = load_error(path)
    assert str(path) in str(err) and "field controls.0.as-of: unknown field" in str(err)


def test_unknown_key_in_a_control_expect(world):
    path = write_case(world, case_data(controls=[{"name": "x", "expect": {"includes": ["a"]}}]))
    err = load_error(path)
    assert "field controls.0.expect.includes: unknown field" in str(err)


def test_unknown_label_and_reason_are_refused(world):
    path = write_case(world, case_data(expect={"labels": {"a": ["shiny"]}, "rejected": {"b": "bored"}}))
    err = load_error(path)
    assert "field expect.labels" in str(err) and "'shiny'" in str(err)
    assert "field expect.rejected" in str(err) and "'bored'" in str(err)


def test_a_case_naming_a_missing_story(world):
    path = write_case(world, case_data(story="nowhere"))
    err = load_error(path)
    assert str(err).startswith(f"{path}: field story: ")
    assert "nowhere" in str(err)


def test_a_control_naming_a_missing_story(world):
    path = write_case(world, case_data(controls=[{"name": "elsewhere", "story": "../fixtures/gone.yaml"}]))
    err = load_error(path)
    assert str(err).startswith(f"{path}: field controls[0] (elsewhere).story: ")
    assert "gone.yaml" in str(err)


@pytest.mark.parametrize("expect,field", [
    ({"lead": "ghost"}, "lead"),
    ({"include": ["a", "ghost"]}, "include"),
    ({"exclude": ["ghost"]}, "exclude"),
    ({"sequence": ["ghost"]}, "sequence"),
    ({"before": [["a", "ghost"]]}, "before"),
    ({"labels": {"ghost": ["phrase_match"]}}, "labels"),
    ({"absent_labels": {"ghost": ["phrase_match"]}}, "absent_labels"),
    ({"rejected": {"ghost": "off_topic"}}, "rejected"),
    ({"fidelity": {"ghost": "summary"}}, "fidelity"),
    ({"shows": {"ghost": ["words"]}}, "shows"),
])
def test_an_expectation_naming_a_record_the_story_lacks(world, expect, field):
    path = write_case(world, case_data(expect=expect))
    err = load_error(path)
    assert str(err) == f"{path}: field expect.{field}: 'ghost' names no record in story tiny"


def test_an_expectation_inside_a_control_naming_a_missing_record(world):
    path = write_case(world, case_data(controls=[{"name": "neg", "expect": {"exclude": ["ghost"]}}]))
    err = load_error(path)
    assert str(err) == f"{path}: control 'neg': field expect.exclude: 'ghost' names no record in story tiny"


def test_id_must_equal_the_file_stem(world):
    path = write_case(world, case_data(cid="c1"), stem="c2")
    err = load_error(path)
    assert str(err) == f"{path}: field id: must equal the file stem 'c2' (value 'c1')"


def test_malformed_case_yaml_names_file_line_and_column(world):
    path = world / "regression" / "c1.yaml"
    path.write_text("id: c1\nstory: tiny\nexpect: {include: [a}\n", encoding="utf-8")
    err = load_error(path)
    assert str(err).startswith(f"{path}:3:")
    assert "malformed YAML" in str(err)
    line, col = str(err)[len(str(path)) + 1:].split(":")[:2]
    assert (int(line), int(col)) == (3, 21)   # the stray "}"


def test_a_case_that_is_not_a_mapping(world):
    path = world / "regression" / "c1.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    err = load_error(path)
    assert str(path) in str(err)


def test_a_case_whose_story_does_not_build_is_bad_input(world):
    bad = dict(STORY, story="broken", records=[{"id": "x", "kind": "note", "text": "t", "topics": ["nope"]}])
    (world / "fixtures" / "broken.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    path = write_case(world, case_data(story="broken", expect={"include": ["x"]}))
    err = load_error(path)
    assert str(path) in str(err) and "does not build" in str(err) and "'nope'" in str(err)


def test_a_build_error_expectation_skips_record_checks(world):
    bad = dict(STORY, story="broken", records=[{"id": "x", "kind": "note", "text": "t", "topics": ["nope"]}])
    (world / "fixtures" / "broken.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    path = write_case(world, case_data(controls=[
        {"name": "typo", "story": "broken", "expect": {"build_error": ["nope"]}}]))
    loaded = load_case(path)
    assert loaded.queries[1].story_path.name == "broken.yaml"


def test_an_unanswerable_case_loads_with_what_an_empty_packet_can_hold(world):
    expect = {"unanswerable": True, "decision": "retrieve", "exclude": ["a"], "rejected": {"b": "below_standout"},
              "absent_labels": {"c": ["phrase_match"]}, "max_items": 0, "warnings": ["nothing"]}
    path = write_case(world, case_data(expect=expect, controls=[{"name": "n", "expect": {"unanswerable": True}}]))
    loaded = load_case(path)
    assert loaded.queries[0].expect.unanswerable is True
    assert loaded.queries[0].expect.exclude == ["a"]
    assert loaded.queries[1].expect.unanswerable is True
    assert Expect().unanswerable is False


UNANSWERABLE_CLASHES = [
    ({"lead": "a"}, "lead"),
    ({"include": ["a"]}, "include"),
    ({"sequence": ["a", "b"]}, "sequence"),
    ({"before": [["a", "b"]]}, "before"),
    ({"labels": {"a": ["phrase_match"]}}, "labels"),
    ({"fidelity": {"a": "summary"}}, "fidelity"),
    ({"shows": {"a": ["text"]}}, "shows"),
]


@pytest.mark.parametrize("clash,field", UNANSWERABLE_CLASHES)
def test_unanswerable_refuses_an_expectation_that_needs_an_item(world, clash, field):
    path = write_case(world, case_data(expect={"unanswerable": True, **clash}))
    err = load_error(path)
    assert len(err.messages) == 1 and "\n" not in str(err)
    assert str(err).startswith(f"{path}: field expect: unanswerable: true says no record answers the question")
    assert f"cannot be combined with {field}, which needs an item in the packet" in str(err)


@pytest.mark.parametrize("clash,field", UNANSWERABLE_CLASHES)
def test_the_same_expectation_without_unanswerable_loads(world, clash, field):
    path = write_case(world, case_data(expect={"unanswerable": False, **clash}))
    assert getattr(load_case(path).queries[0].expect, field)


def test_unanswerable_names_every_clash_in_a_control(world):
    path = write_case(world, case_data(controls=[
        {"name": "n", "expect": {"unanswerable": True, "include": ["a"], "before": [["a", "b"]]}}]))
    err = load_error(path)
    assert len(err.messages) == 1
    assert str(err).startswith(f"{path}: field controls.0.expect: unanswerable: true")
    assert "cannot be combined with include and before, which need an item in the packet" in str(err)


# --- control inheritance ------------------------------------------------------------


def test_a_control_inherits_everything_it_does_not_set(world):
    path = write_case(world, case_data(
        budget=500, hints={"topics": ["gaming"]}, include_private=True,
        settings={"standout": 2.0}, session=["earlier question"],
        controls=[{"name": "bare"}]))
    loaded = load_case(path)
    case_fields, control_fields = loaded.queries[0].spec_fields, loaded.queries[1].spec_fields
    assert control_fields == case_fields
    assert control_fields["query"] == "what about alpha?"
    assert control_fields["as_of"] == dt.date(2030, 1, 6)
    assert control_fields["budget"] == 500
    assert control_fields["hints"] == Hints(topics=["gaming"])
    assert control_fields["include_private"] is True
    assert control_fields["settings"] == Settings(standout=2.0)
    assert control_fields["session"] == ["earlier question"]
    assert loaded.queries[1].story_path == loaded.queries[0].story_path


def test_a_control_overrides_what_it_sets(world):
    path = write_case(world, case_data(
        budget=500, hints={"topics": ["gaming"]}, include_private=True,
        settings={"standout": 2.0}, session=["earlier question"],
        controls=[{"name": "all set", "query": "bravo?", "as_of": "2030-01-02", "budget": 50,
                   "hints": {"entities": []}, "include_private": False, "settings": {"lane_cap": 2},
                   "session": []}]))
    fields = load_case(path).queries[1].spec_fields
    assert fields["query"] == "bravo?"
    assert fields["as_of"] == dt.date(2030, 1, 2)
    assert fields["budget"] == 50
    assert fields["hints"] == Hints()
    assert fields["include_private"] is False
    assert fields["settings"] == Settings(lane_cap=2)
    assert fields["session"] == []


def test_a_control_overriding_one_field_keeps_the_others(world):
    path = write_case(world, case_data(budget=500, controls=[{"name": "later", "as_of": "2030-02-01"}]))
    fields = load_case(path).queries[1].spec_fields
    assert fields["as_of"] == dt.date(2030, 2, 1)
    assert fields["budget"] == 500
    assert fields["query"] == "what about alpha?"


def test_a_control_has_its_own_expectations(world):
    path = write_case(world, case_data(expect={"lead": "a"}, controls=[{"name": "n", "expect": {"exclude": ["b"]}}]))
    loaded = load_case(path)
    assert loaded.queries[0].expect.lead == "a"
    assert loaded.queries[1].expect.lead is None
    assert loaded.queries[1].expect.exclude == ["b"]


def test_spec_for_builds_a_query_spec(world):
    path = write_case(world, case_data(budget=77, session=["q0"]))
    loaded = load_case(path)
    story = load_story(loaded.queries[0].story_path)
    spec = spec_for(loaded.queries[0], story)
    assert (spec.query, spec.as_of, spec.budget, spec.session) == ("what about alpha?", dt.date(2030, 1, 6), 77, ["q0"])
    assert spec.story is story
    spec.session.append("later")
    assert loaded.queries[0].spec_fields["session"] == ["q0"]


# --- check(): every expectation kind, passing and failing --------------------------


@pytest.fixture
def story(world):
    return load_story(world / "fixtures" / "tiny.yaml")


def item(rid: str, kind: str = "note", labels=(), why=()) -> PacketItem:
    return PacketItem(id=rid, kind=kind, fidelity="transcript", labels=list(labels), score=1.0,
                      why=list(why), text=f"text of {rid}")


def packet(ids=(), decision="retrieve", rejected=None, warnings=(), labels=None, why=None) -> Packet:
    labels = labels or {}
    why = why or {}
    return Packet(decision=decision, reason="because", warnings=list(warnings),
                  items=[item(i, labels=labels.get(i, ()), why=why.get(i, ())) for i in ids],
                  rejected=[Rejection(id=k, reason=v) for k, v in (rejected or {}).items()],
                  budget=Budget(limit=100, used=10))


def run(story, expect: dict, pkt: Packet, include_private: bool = False) -> list[str]:
    return check(Expect(**expect), pkt, story, include_private)


def test_an_empty_expectation_passes(story):
    assert run(story, {}, packet(["a", "b"])) == []


def test_decision(story):
    assert run(story, {"decision": "retrieve"}, packet(["a"])) == []
    assert run(story, {"decision": "ask"}, packet(["a"])) == ["decision: expected ask, got retrieve (because)"]


def test_lead(story):
    assert run(story, {"lead": "a"}, packet(["a", "b"])) == []
    assert run(story, {"lead": "b"}, packet(["a", "b"])) == ["lead: expected b, got a"]


def test_lead_names_why_the_expected_item_is_missing(story):
    pkt = packet(["a"], rejected={"b": "off_topic"})
    assert run(story, {"lead": "b"}, pkt) == ["lead: expected b, got a; b rejected as off_topic"]
    assert run(story, {"lead": "c"}, pkt) == ["lead: expected c, got a; c not a candidate"]
    assert run(story, {"lead": "a"}, packet([])) == ["lead: expected a, got an empty packet; a not a candidate"]


def test_include(story):
    assert run(story, {"include": ["a", "b"]}, packet(["b", "a"])) == []
    assert run(story, {"include": ["a", "c"]}, packet(["a"], rejected={"c": "over_budget"})) == [
        "include: c is not in the packet (rejected as over_budget)"]


def test_exclude(story):
    assert run(story, {"exclude": ["c"]}, packet(["a"], rejected={"c": "off_topic"})) == []
    assert run(story, {"exclude": ["c"]}, packet(["a"])) == []
    assert run(story, {"exclude": ["b"]}, packet(["a", "b"])) == ["exclude: b is in the packet at position 2"]


def test_sequence(story):
    assert run(story, {"sequence": ["b", "c"]}, packet(["a", "b", "c", "d"])) == []
    assert run(story, {"sequence": ["b", "c"]}, packet(["b", "a", "c"])) == [
        "sequence: expected b -> c consecutive, got b -> a -> c"]
    assert run(story, {"sequence": ["b", "c"]}, packet(["c", "b"])) == [
        "sequence: expected b -> c consecutive, got c -> b"]


def test_sequence_requires_every_item_in_the_packet(story):
    failures = run(story, {"sequence": ["a", "b"]}, packet(["a"], rejected={"b": "predecessor_without_successor"}))
    assert failures == ["sequence: b not in the packet (rejected as predecessor_without_successor)"]


def test_before(story):
    assert run(story, {"before": [["a", "c"]]}, packet(["a", "b", "c"])) == []
    assert run(story, {"before": [["c", "a"]]}, packet(["a", "b", "c"])) == [
        "before: expected c ahead of a, got a at 1 and c at 3"]
    assert run(story, {"before": [["a", "d"]]}, packet(["a"])) == [
        "before: d not in the packet, so a cannot be ahead of d"]


def test_labels(story):
    pkt = packet(["a"], labels={"a": ["structured_context", "phrase_match"]})
    assert run(story, {"labels": {"a": ["phrase_match"]}}, pkt) == []
    assert run(story, {"labels": {"a": ["derived_view"]}}, pkt) == [
        "labels: a lacks derived_view (has structured_context, phrase_match)"]
    assert run(story, {"labels": {"a": ["derived_view"]}}, packet(["a"])) == ["labels: a lacks derived_view (has none)"]


def test_labels_require_the_item_in_the_packet(story):
    failures = run(story, {"labels": {"b": ["structured_context"]}}, packet(["a"], rejected={"b": "rank_cut"}))
    assert failures == ["labels: b is not in the packet (rejected as rank_cut), so it carries no labels"]


def test_absent_labels(story):
    pkt = packet(["a"], labels={"a": ["phrase_match"]}, why={"a": ["phrase 'glacier custard'"]})
    assert run(story, {"absent_labels": {"a": ["derived_view"]}}, pkt) == []
    assert run(story, {"absent_labels": {"b": ["phrase_match"]}}, pkt) == []   # absent item holds
    assert run(story, {"absent_labels": {"a": ["phrase_match"]}}, pkt) == [
        "absent_labels: a carries phrase_match (phrase 'glacier custard')"]


def test_rejected(story):
    pkt = packet(["a"], rejected={"b": "off_topic"})
    assert run(story, {"rejected": {"b": "off_topic"}}, pkt) == []
    assert run(story, {"rejected": {"b": "rank_cut"}}, pkt) == [
        "rejected: expected b rejected as rank_cut, got rejected as off_topic"]
    assert run(story, {"rejected": {"c": "rank_cut"}}, pkt) == [
        "rejected: expected c rejected as rank_cut, got not a candidate"]
    assert run(story, {"rejected": {"a": "rank_cut"}}, pkt) == [
        "rejected: expected a rejected as rank_cut, but it is in the packet"]


def test_fidelity(story):
    pkt = packet(["a"])                                  # items are built as transcript
    assert run(story, {"fidelity": {"a": "transcript"}}, pkt) == []
    assert run(story, {"fidelity": {"a": "summary"}}, pkt) == [
        "fidelity: expected a reported as summary, got transcript"]
    assert run(story, {"fidelity": {"c": "summary"}}, packet(["a"], rejected={"c": "rank_cut"})) == [
        "fidelity: c is not in the packet (rejected as rank_cut)"]


def test_shows(story):
    pkt = packet(["a"], rejected={"c": "rank_cut"})      # an item's text is "text of <id>"
    assert run(story, {"shows": {"a": ["text of", "of a"]}}, pkt) == []
    assert run(story, {"shows": {"a": ["text of", "the hold"]}}, pkt) == [
        "shows: a's text in the packet lacks 'the hold'"]
    assert run(story, {"shows": {"c": ["text"]}}, pkt) == ["shows: c is not in the packet (rejected as rank_cut)"]


def test_max_items(story):
    assert run(story, {"max_items": 2}, packet(["a", "b"])) == []
    assert run(story, {"max_items": 0}, packet([])) == []
    assert run(story, {"max_items": 1}, packet(["a", "b"])) == ["max_items: expected at most 1 items, got 2"]


def test_warnings(story):
    pkt = packet(["a"], warnings=["hint topic 'feild_test' is not a canonical topic id"])
    assert run(story, {"warnings": ["feild_test"]}, pkt) == []
    assert run(story, {"warnings": ["gamez"]}, pkt) == [
        "warnings: no warning mentions 'gamez' (warnings: [\"hint topic 'feild_test' is not a canonical topic id\"])"]
    assert run(story, {"warnings": ["gamez"]}, packet(["a"])) == [
        "warnings: no warning mentions 'gamez' (warnings: none)"]


def test_build_error_expected_but_the_story_built(story):
    failures = run(story, {"build_error": ["feild_test"]}, packet(["a"]))
    assert failures == ["build_error: expected story tiny to fail to build naming feild_test, but it built"]


def test_several_failures_are_each_reported(story):
    failures = run(story, {"decision": "skip", "lead": "b", "include": ["c"], "max_items": 0}, packet(["a"]))
    assert len(failures) == 4
    assert [f.split(":")[0] for f in failures] == ["decision", "lead", "include", "max_items"]


def test_unanswerable_fails_on_a_packet_with_items(story):
    assert run(story, {"unanswerable": True}, packet(["a"])) == [
        "unanswerable: nothing in the store answers this question, but the packet holds 1 item (a)"]
    assert run(story, {"unanswerable": True}, packet(["a", "b", "c", "d"])) == [
        "unanswerable: nothing in the store answers this question, but the packet holds 4 items (a, b, c, ...)"]


def test_unanswerable_passes_on_an_empty_packet_whatever_the_decision(story):
    assert run(story, {"unanswerable": True}, packet([])) == []
    assert run(story, {"unanswerable": True}, packet([], decision="ask")) == []
    assert run(story, {"unanswerable": True}, packet([], decision="skip")) == []


def test_unanswerable_keeps_the_case_s_own_decision(story):
    assert run(story, {"unanswerable": True, "decision": "retrieve"}, packet([], decision="ask")) == [
        "decision: expected retrieve, got ask (because)"]
    assert run(story, {"unanswerable": True, "decision": "ask"}, packet([], decision="ask")) == []


# --- the always-on checks -------------------------------------------------------------


def test_privacy_leak_fails_every_case(story):
    assert run(story, {}, packet(["a", "secret"])) == [
        "privacy: private record secret is in a packet whose query did not allow it"]


def test_a_private_record_is_fine_when_the_query_allows_it(story):
    assert run(story, {}, packet(["a", "secret"]), include_private=True) == []


def test_a_control_record_in_a_packet_fails_every_case(story):
    assert run(story, {}, packet(["manifest"])) == ["control plane: control record manifest is in the packet"]
    assert run(story, {}, packet(["manifest"]), include_private=True) == [
        "control plane: control record manifest is in the packet"]


# --- check_build_error -----------------------------------------------------------------


def test_check_build_error_without_an_error_is_silent():
    assert check_build_error(Expect(build_error=["x"]), None, Path("s.yaml")) == []
    assert check_build_error(Expect(), None, Path("s.yaml")) == []


def test_check_build_error_needs_every_needle():
    error = StoryError(["s.yaml: record d.one: field topics: 'feild_test' is not a canonical topic id"])
    assert check_build_error(Expect(build_error=["feild_test", "d.one", "topics"]), error, Path("s.yaml")) == []
    failures = check_build_error(Expect(build_error=["feild_test", "d.two"]), error, Path("s.yaml"))
    assert len(failures) == 1
    assert failures[0].startswith("build_error: no build error names 'd.two' (errors: s.yaml: record d.one")


def test_an_unexpected_build_error_is_a_failure():
    error = StoryError(["s.yaml: record d.one: field topics: 'x' is not a canonical topic id", "second"])
    assert check_build_error(Expect(), error, Path("s.yaml")) == [
        "story s.yaml failed to build: s.yaml: record d.one: field topics: 'x' is not a canonical topic id"]
