"""Stories: every rule of "Validation at build", the derived index, story lookup, latest_date."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from garden.formats.yaml_reader import describe_pydantic_error, read_yaml
from garden.errors import GardenError, StoryError
from garden.formats.stories import build_index, index_path, latest_date, load_story, resolve_story_path


def note(rid: str, **fields) -> dict:
    return {"id": rid, "kind": "note", "text": f"text of {rid}", "at": "2030-01-02", **fields}


def story_data(name: str = "tiny", records: list[dict] | None = None, **top) -> dict:
    data = {
        "story": name,
        "project": "tiny",
        "topics": {"gaming": {"aliases": ["games", "video games"]}, "food": {}},
        "entities": {
            "mira": {"name": "Mira", "aliases": ["mira"]},
            "observatory_captain": {"name": "Observatory captain", "aliases": ["observatory captain"]},
        },
        "records": records if records is not None else [note("n1")],
    }
    data.update(top)
    return data


def write_story(folder: Path, data: dict, stem: str | None = None) -> Path:
    path = folder / f"{stem or data['story']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(StoryError) as info:
        load_story(path)
    assert info.value.status == 2  # bad input to every command but `check`
    return info.value.messages


def only_error(path: Path) -> str:
    errors = errors_of(path)
    assert len(errors) == 1, errors
    return errors[0]


# --- a valid story -------------------------------------------------------------


def test_a_valid_story_loads_with_dates_and_defaults(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        note("n1", topics=["gaming"], entities=["mira"]),
        {"id": "s1", "kind": "state", "text": "s", "observed_at": "2030-01-02", "valid_from": "2030-01-02",
         "last_confirmed_at": "2030-01-02", "valid_to": "2030-01-02"},
        {"id": "ctl", "kind": "control"},
    ]))
    story = load_story(path)
    assert story.name == "tiny"
    assert [r.id for r in story.records] == ["n1", "s1", "ctl"]
    assert story.record("n1").at == dt.date(2030, 1, 2)
    assert story.record("s1").effective_fidelity == "projection"
    assert story.record("n1").effective_fidelity == "summary"  # a note defaults to a summary


# --- each rule, alone ------------------------------------------------------------


def test_unknown_field_on_a_record_names_file_record_field_and_value(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", topcis=["gaming"])]))
    msg = only_error(path)
    assert str(path) in msg
    assert "record n1" in msg
    assert "field topcis" in msg
    assert "unknown field" in msg
    assert "gaming" in msg


def test_unknown_field_at_top_level(tmp_path):
    path = write_story(tmp_path, story_data(colour="blue"))
    msg = only_error(path)
    assert msg.startswith(f"{path}: field colour: unknown field")
    assert "'blue'" in msg


def test_unknown_field_at_top_level_does_not_hide_record_errors(tmp_path):
    path = write_story(tmp_path, story_data(colour="blue", records=[note("n1", topics=["gamez"])]))
    errors = errors_of(path)
    assert len(errors) == 2, errors
    assert any("field colour" in e for e in errors)
    assert any("record n1" in e and "field topics" in e and "'gamez'" in e for e in errors)


def test_unknown_field_inside_a_topic_spec(tmp_path):
    path = write_story(tmp_path, story_data(topics={"gaming": {"alias": ["games"]}}))
    msg = only_error(path)
    assert str(path) in msg and "topics.gaming.alias" in msg and "unknown field" in msg


def test_duplicate_id(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1"), note("n2"), note("n1")]))
    msg = only_error(path)
    assert str(path) in msg
    assert "record n1" in msg and "field id" in msg and "duplicate id 'n1'" in msg and "2 records" in msg


def test_malformed_id(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("Bad Id")]))
    msg = only_error(path)
    assert "record Bad Id" in msg and "field id" in msg and "'Bad Id'" in msg


def test_topic_that_is_not_canonical(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", topics=["gaming", "feild_test"])]))
    msg = only_error(path)
    assert str(path) in msg
    assert "record n1" in msg and "field topics" in msg
    assert "'feild_test' is not a canonical topic id" in msg
    assert "alias of" not in msg


def test_topic_alias_used_as_label_gets_the_alias_hint(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", topics=["video games"])]))
    msg = only_error(path)
    assert "record n1" in msg and "field topics" in msg and "'video games'" in msg
    assert "alias of 'gaming'" in msg


def test_topic_alias_hint_is_case_insensitive(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", topics=["Games"])]))
    assert "alias of 'gaming'" in only_error(path)


def test_entity_alias_used_as_label_gets_the_alias_hint(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", entities=["observatory captain"])]))
    msg = only_error(path)
    assert "record n1" in msg and "field entities" in msg
    assert "'observatory captain' is not a canonical entity id" in msg
    assert "alias of 'observatory_captain'" in msg


def test_a_typo_repeated_in_several_records_is_reported_for_each(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        note("n1", topics=["feild_test"]),
        note("n2", topics=["feild_test"]),
        note("n3", topics=["feild_test"]),
    ]))
    errors = errors_of(path)
    assert len(errors) == 3, errors
    for rid in ("n1", "n2", "n3"):
        assert sum(f"record {rid}: field topics: 'feild_test'" in e for e in errors) == 1


def test_related_topic_must_be_canonical(tmp_path):
    path = write_story(tmp_path, story_data(topics={"gaming": {"related": ["logistcs"]}}))
    msg = only_error(path)
    assert "topic gaming" in msg and "field related" in msg and "'logistcs'" in msg


@pytest.mark.parametrize("field,value", [
    ("sources", ["ghost"]),
    ("related", ["ghost"]),
    ("superseded_by", "ghost"),
])
def test_reference_to_a_missing_record(tmp_path, field, value):
    extra = {"status": "superseded"} if field == "superseded_by" else {}
    path = write_story(tmp_path, story_data(records=[note("n1", **{field: value}, **extra)]))
    msg = only_error(path)
    assert str(path) in msg
    assert "record n1" in msg and f"field {field}" in msg and "'ghost'" in msg
    assert "names no record" in msg


def test_references_to_existing_records_are_fine(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        note("src"),
        note("n1", sources=["src"], related=["src"]),
        {"id": "d.old", "kind": "decision", "text": "old", "status": "superseded", "superseded_by": "d.new"},
        {"id": "d.new", "kind": "decision", "text": "new", "status": "active"},
    ]))
    assert load_story(path).record("n1").sources == ["src"]


@pytest.mark.parametrize("value,words", [
    ("2030-01-32", "day value is outside expected range"),
    ("2030-13-01", "month value is outside expected range"),
    ("2030-02-30", "day value is outside expected range"),
    ("next tuesday", "invalid character"),
])
@pytest.mark.parametrize("field", ["at", "observed_at", "valid_from", "valid_to", "last_confirmed_at",
                                   "expected_resolution_at", "decided_at"])
def test_malformed_date(tmp_path, field, value, words):
    path = write_story(tmp_path, story_data(records=[note("n1", **{field: value})]))
    msg = only_error(path)
    assert str(path) in msg
    assert "record n1" in msg and f"field {field}" in msg
    assert repr(value) in msg
    assert words in msg


def test_malformed_date_written_unquoted_reaches_validation(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "story: tiny\nproject: tiny\nrecords:\n"
        "  - id: n1\n    kind: note\n    text: hello\n    at: 2030-01-32\n", encoding="utf-8")
    msg = only_error(path)
    assert "record n1: field at" in msg and "'2030-01-32'" in msg


def test_malformed_reviewed_at_at_top_level(tmp_path):
    path = write_story(tmp_path, story_data(reviewed_at="2030-13-01"))
    msg = only_error(path)
    assert f"{path}: field reviewed_at" in msg and "'2030-13-01'" in msg


def test_last_confirmed_before_observed(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "s1", "kind": "state", "text": "s", "observed_at": "2030-01-05", "last_confirmed_at": "2030-01-04"},
    ]))
    msg = only_error(path)
    assert "record s1" in msg and "field last_confirmed_at" in msg
    assert "2030-01-04" in msg and "2030-01-05" in msg


def test_valid_to_before_valid_from(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "s1", "kind": "state", "text": "s", "valid_from": "2030-01-05", "valid_to": "2030-01-01"},
    ]))
    msg = only_error(path)
    assert "record s1" in msg and "field valid_to" in msg
    assert "2030-01-01" in msg and "2030-01-05" in msg


def test_superseded_without_superseded_by(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "d1", "kind": "decision", "text": "d", "status": "superseded"},
    ]))
    msg = only_error(path)
    assert "record d1" in msg and "field superseded_by" in msg and "superseded" in msg


def test_supersession_cycle_is_reported_once_with_its_chain(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "d.a", "kind": "decision", "text": "a", "status": "superseded", "superseded_by": "d.b"},
        {"id": "d.b", "kind": "decision", "text": "b", "status": "superseded", "superseded_by": "d.c"},
        {"id": "d.c", "kind": "decision", "text": "c", "status": "superseded", "superseded_by": "d.a"},
    ]))
    msg = only_error(path)
    assert "record d.a" in msg and "field superseded_by" in msg
    assert "supersession cycle d.a -> d.b -> d.c -> d.a" in msg


def test_a_record_superseding_itself_is_a_cycle(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "d.a", "kind": "decision", "text": "a", "status": "superseded", "superseded_by": "d.a"},
    ]))
    assert "supersession cycle d.a -> d.a" in only_error(path)


def test_a_chain_that_ends_is_not_a_cycle(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        {"id": "d.a", "kind": "decision", "text": "a", "status": "superseded", "superseded_by": "d.b"},
        {"id": "d.b", "kind": "decision", "text": "b", "status": "superseded", "superseded_by": "d.c"},
        {"id": "d.c", "kind": "decision", "text": "c", "status": "active"},
    ]))
    assert load_story(path).record("d.a").superseded_by == "d.b"


@pytest.mark.parametrize("text", [None, "", "   "])
def test_text_is_required_except_on_control_records(tmp_path, text):
    rec = {"id": "n1", "kind": "note"}
    if text is not None:
        rec["text"] = text
    path = write_story(tmp_path, story_data(records=[rec, {"id": "ctl", "kind": "control"}]))
    msg = only_error(path)
    assert "record n1" in msg and "field text" in msg and "note record" in msg


def test_story_name_must_equal_the_file_stem(tmp_path):
    path = write_story(tmp_path, story_data(name="tiny"), stem="other")
    msg = only_error(path)
    assert str(path) in msg and "field story" in msg and "'other'" in msg and "'tiny'" in msg


def test_missing_required_header_field(tmp_path):
    data = story_data()
    del data["project"]
    path = write_story(tmp_path, data)
    msg = only_error(path)
    assert f"{path}: field project: required field is missing" == msg


def test_malformed_yaml_names_file_line_and_column(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("story: tiny\nproject: tiny\ntopics:\n  gaming: {aliases: [games}\nrecords: []\n",
                    encoding="utf-8")
    with pytest.raises(GardenError) as info:
        load_story(path)
    assert info.value.messages[0].startswith(f"{path}:4:27: malformed YAML")


def test_a_story_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(StoryError) as info:
        load_story(path)
    assert str(path) in str(info.value)


# --- every error at once -------------------------------------------------------


def many_problems(tmp_path) -> Path:
    return write_story(tmp_path, story_data(colour="blue", records=[
        note("n1", topcis=["gaming"]),                                        # unknown field
        note("n2", topics=["games"]),                                         # alias as label
        note("n2"),                                                           # duplicate id
        note("n3", entities=["captain"], sources=["ghost"]),                  # bad entity, dangling ref
        note("n4", at="2030-01-32"),                                          # malformed date
        {"id": "s1", "kind": "state", "text": "s", "observed_at": "2030-01-05",
         "last_confirmed_at": "2030-01-04", "valid_from": "2030-01-05", "valid_to": "2030-01-03"},
        {"id": "d1", "kind": "decision", "text": "d", "status": "superseded"},
        {"id": "d.x", "kind": "decision", "text": "x", "superseded_by": "d.y"},
        {"id": "d.y", "kind": "decision", "text": "y", "superseded_by": "d.x"},
        {"id": "n5", "kind": "note"},                                         # text missing
    ]), stem="not-tiny")


EXPECTED = [
    # (record or None for the top level, field, value)
    (None, "colour", "'blue'"),
    (None, "story", "'tiny'"),
    ("n1", "topcis", "gaming"),
    ("n2", "topics", "'games'"),
    ("n2", "id", "'n2'"),
    ("n3", "entities", "'captain'"),
    ("n3", "sources", "'ghost'"),
    ("n4", "at", "'2030-01-32'"),
    ("s1", "last_confirmed_at", "2030-01-04"),
    ("s1", "valid_to", "2030-01-03"),
    ("d1", "superseded_by", "None"),
    ("d.x", "superseded_by", "d.x -> d.y -> d.x"),
    ("n5", "text", "None"),
]


def test_every_error_of_a_story_is_reported_at_once(tmp_path):
    path = many_problems(tmp_path)
    errors = errors_of(path)
    assert len(errors) == len(EXPECTED), "\n".join(errors)
    for rid, field, value in EXPECTED:
        where = f"{path}: record {rid}: field {field}:" if rid else f"{path}: field {field}:"
        hits = [e for e in errors if e.startswith(where) and value in e]
        assert len(hits) == 1, (where, value, errors)


def test_a_record_with_a_bad_field_is_still_checked_and_still_exists(tmp_path):
    path = write_story(tmp_path, story_data(records=[
        note("n1", at="2030-01-32", topics=["gamez"]),
        note("n1", at="2030-13-01"),
        note("n2", sources=["n1"]),
    ]))
    errors = errors_of(path)
    assert any("record n1: field at" in e and "2030-01-32" in e for e in errors)
    assert any("record n1: field at" in e and "2030-13-01" in e for e in errors)
    assert any("record n1: field topics: 'gamez'" in e for e in errors)
    assert any("record n1: field id: duplicate id" in e for e in errors)
    assert not any("names no record" in e for e in errors), errors
    assert len(errors) == 4, errors


def test_a_bad_field_is_not_also_reported_as_missing(tmp_path):
    path = write_story(tmp_path, story_data(records=[note("n1", text=["not", "a", "string"])]))
    msg = only_error(path)
    assert "record n1: field text" in msg and "valid string" in msg


def test_a_broken_topic_table_does_not_make_every_label_an_error(tmp_path):
    path = write_story(tmp_path, story_data(topics=["gaming"], records=[note("n1", topics=["gaming"])]))
    msg = only_error(path)
    assert f"{path}: field topics" in msg


# --- _yaml ----------------------------------------------------------------------


def test_read_yaml_leaves_timestamps_as_text(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("at: 2030-01-02\nn: 3\n", encoding="utf-8")
    assert read_yaml(path) == {"at": "2030-01-02", "n": 3}


def test_read_yaml_missing_file_and_directory(tmp_path):
    with pytest.raises(GardenError, match="no such file"):
        read_yaml(tmp_path / "absent.yaml")
    with pytest.raises(GardenError, match="is a folder, not a regular file"):
        read_yaml(tmp_path)


def test_describe_pydantic_error_kinds():
    assert describe_pydantic_error({"type": "extra_forbidden", "loc": ("records", 0, "x"), "input": 5}) == (
        "records.0.x", "unknown field (value 5)")
    assert describe_pydantic_error({"type": "missing", "loc": ("project",)}) == ("project", "required field is missing")
    assert describe_pydantic_error({"type": "other", "loc": (), "msg": "bad", "input": "v"}) == (
        "(top level)", "bad (value 'v')")


# --- the derived index ------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("GARDEN_HOME", str(h))
    return h


def test_build_index_writes_under_garden_home(tmp_path, home):
    path = write_story(tmp_path, story_data())
    target = build_index(path)
    assert target == home / "index" / "tiny.json"
    assert target == index_path("tiny")
    payload = json.loads(target.read_text(encoding="utf-8"))
    assert payload["story"]["story"] == "tiny"
    assert payload["source"] == str(path.resolve())
    assert payload["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny.json"]


def test_a_failed_build_leaves_the_previous_index_untouched(tmp_path, home):
    path = write_story(tmp_path, story_data())
    target = build_index(path)
    before = target.read_bytes()
    write_story(tmp_path, story_data(records=[note("n1", topics=["feild_test"])]))
    with pytest.raises(StoryError):
        build_index(path)
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny.json"]


def test_a_failed_write_leaves_the_previous_index_and_no_temp_file(tmp_path, home, monkeypatch):
    path = write_story(tmp_path, story_data())
    target = build_index(path)
    before = target.read_bytes()
    write_story(tmp_path, story_data(records=[note("n1"), note("n2")]))

    def disk_full(*args, **kwargs):
        raise OSError("disk full")

    import garden.derived.home as home_mod

    monkeypatch.setattr(home_mod.os, "fsync", disk_full)  # the write fails before its rename
    with pytest.raises(OSError, match="disk full"):
        build_index(path)
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == ["tiny.json"]


def test_a_failed_first_build_writes_nothing(tmp_path, home):
    path = write_story(tmp_path, story_data(records=[note("n1", topics=["feild_test"])]))
    with pytest.raises(StoryError):
        build_index(path)
    index = home / "index"
    assert not index.exists() or list(index.iterdir()) == []


def test_a_rebuild_replaces_the_index(tmp_path, home):
    path = write_story(tmp_path, story_data())
    target = build_index(path)
    write_story(tmp_path, story_data(records=[note("n1"), note("n2")]))
    build_index(path)
    ids = [r["id"] for r in json.loads(target.read_text(encoding="utf-8"))["story"]["records"]]
    assert ids == ["n1", "n2"]


# --- finding a story -----------------------------------------------------------------


def test_a_name_is_found_in_a_fixtures_folder_above_the_case(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fixtures = tmp_path / "proj" / "fixtures"
    fixtures.mkdir(parents=True)
    story = write_story(fixtures, story_data())
    deep = tmp_path / "proj" / "regression" / "group"
    deep.mkdir(parents=True)
    assert resolve_story_path("tiny", deep).resolve() == story.resolve()


def test_the_nearest_fixtures_folder_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fixtures").mkdir()
    write_story(tmp_path / "fixtures", story_data())
    near = tmp_path / "inner" / "fixtures"
    near.mkdir(parents=True)
    nearer = write_story(near, story_data())
    assert resolve_story_path("tiny", tmp_path / "inner").resolve() == nearer.resolve()


def test_a_name_falls_back_to_fixtures_under_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "fixtures").mkdir()
    story = write_story(tmp_path / "fixtures", story_data())
    monkeypatch.chdir(tmp_path)
    assert resolve_story_path("tiny").resolve() == story.resolve()


def test_a_relative_yaml_path_is_relative_to_the_case_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = tmp_path / "fixtures" / "broken"
    broken.mkdir(parents=True)
    story = write_story(broken, story_data(name="odd"))
    cases = tmp_path / "challenge"
    cases.mkdir()
    found = resolve_story_path("../fixtures/broken/odd.yaml", cases)
    assert found.resolve() == story.resolve()
    assert resolve_story_path(str(story)) == story


def test_a_missing_story_is_a_garden_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GardenError) as info:
        resolve_story_path("nowhere", tmp_path)
    assert "nowhere" in str(info.value) and info.value.status == 2
    with pytest.raises(GardenError) as info:
        resolve_story_path("../fixtures/nowhere.yaml", tmp_path)
    assert "nowhere.yaml" in str(info.value)


# --- latest_date ------------------------------------------------------------------------


def test_latest_date_is_the_latest_date_the_story_mentions(tmp_path):
    path = write_story(tmp_path, story_data(reviewed_at="2030-01-03", records=[
        note("n1", at="2030-01-02"),
        {"id": "s1", "kind": "state", "text": "s", "observed_at": "2030-01-01",
         "last_confirmed_at": "2030-01-07", "expected_resolution_at": "2030-03-01", "valid_to": "2030-04-01"},
        {"id": "d1", "kind": "decision", "text": "d", "decided_at": "2030-01-05"},
    ]))
    assert latest_date(load_story(path)) == dt.date(2030, 1, 7)


def test_latest_date_counts_reviewed_at(tmp_path):
    path = write_story(tmp_path, story_data(reviewed_at="2030-02-01"))
    assert latest_date(load_story(path)) == dt.date(2030, 2, 1)


def test_latest_date_of_a_story_without_dates(tmp_path):
    path = write_story(tmp_path, story_data(records=[{"id": "n1", "kind": "note", "text": "t"}]))
    with pytest.raises(GardenError, match="no dates"):
        latest_date(load_story(path))


def test_a_key_written_twice_is_a_located_error(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("story: dup\nproject: p\nrecords:\n  - id: a\n    kind: note\n    text: hi\n"
                    "    topics: []\n    topics: [x]\n")
    with pytest.raises(GardenError) as exc:
        load_story(path)
    message = exc.value.messages[0]
    assert f"{path}:8:5" in message and "duplicate key 'topics'" in message and "line 7" in message


@pytest.mark.parametrize("kind, fidelity", [("source", "transcript"), ("chunk", "transcript"),
                                            ("state", "projection"), ("decision", "projection"),
                                            ("view", "projection"), ("note", "summary")])
def test_each_kind_has_a_default_fidelity_and_a_stated_one_wins(kind, fidelity):
    from garden.models import Record

    assert Record(id="r", kind=kind, text="t").effective_fidelity == fidelity
    assert Record(id="r", kind=kind, text="t", fidelity="hybrid").effective_fidelity == "hybrid"
