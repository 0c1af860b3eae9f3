"""Hostile input: YAML that tries to expand, recurse or crash the reader, and values that
try to make a message long, multi-line or visually reordered. Each must end in bounded,
located, one-line messages and a clean exit code, with nothing written."""
from __future__ import annotations

import re
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import garden.formats.yaml_reader as yaml_mod
import garden.formats.stories as stories_mod
from garden.text import ELLIPSIS, one_line, shown, shown_id
from garden.formats.yaml_reader import MAX_DEPTH, describe_pydantic_error, read_yaml
from garden.cli import main
from garden.errors import GardenError, StoryError
from garden.models import Record, Story
from garden.formats.stories import load_story, semantic_errors

HIDDEN = {"Cc", "Cf", "Zl", "Zp"}
OUTPUT_BOUND = 10_000   # bytes a hostile story may make `garden check` print
SECONDS = 5.0           # far above what any of these takes once bounded


def hidden_chars(text: str) -> list[str]:
    return [ch for ch in text if unicodedata.category(ch) in HIDDEN]


def bomb(levels: int = 9, indent: str = "") -> str:
    """The "billion laughs": nine aliases to nine aliases to ... nine scalars."""
    names = "abcdefghijklmnop"[:levels]
    lines = [f"{indent}a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip(names, names[1:]):
        lines.append(f"{indent}{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def story_text(name: str, records: str = "records: []\n", top: str = "") -> str:
    return f"story: {name}\nproject: {name}\n{top}{records}"


# --- garden.text ---------------------------------------------------------------


@pytest.mark.parametrize("ch, escaped", [
    ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\x00", "\\x00"), ("\x1b", "\\x1b"),
    ("\u202e", "\\u202e"), ("\u200b", "\\u200b"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
    ("\ufeff", "\\ufeff"), ("\x85", "\\x85"),
])
def test_shown_escapes_every_character_that_changes_how_a_line_reads(ch, escaped):
    out = shown(f"a{ch}b")
    assert out == f"'a{escaped}b'"
    assert hidden_chars(out) == []


def test_shown_cuts_a_long_value_and_notes_its_length():
    out = shown("a" * 10_000)
    assert len(out) <= 80
    assert out.startswith("'aaaa") and out.endswith(f"{ELLIPSIS}' (10000 chars)")


def test_shown_never_walks_a_huge_container():
    items = list(range(1_000_000))
    start = time.perf_counter()
    out = shown(items)
    assert time.perf_counter() - start < 0.5
    assert out.startswith("[0, 1, 2") and out.endswith(f"{ELLIPSIS} (1000000 items)")
    assert len(out) <= 80


def test_shown_survives_what_repr_cannot_print():
    assert "digits" in shown(10 ** 5000)  # repr() itself refuses integers this long
    loop: list = []
    loop.append(loop)
    assert shown(loop) == "[[...]]"
    assert shown({"k": ("v",)}) == "{'k': ('v',)}"


@given(st.text(max_size=40))
def test_shown_reads_as_repr_when_it_fits(text):
    if len(repr(text)) <= 80:
        assert shown(text) == repr(text)


values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                      lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


@settings(max_examples=200)
@given(values, st.integers(min_value=0, max_value=200))
def test_shown_is_one_bounded_line_for_any_value(value, limit):
    out = shown(value, limit)
    assert len(out) <= max(limit, 20)
    assert hidden_chars(out) == []


@pytest.mark.parametrize("rid", ["chat.0102", "state.mira.gaming", "n1", "Bad Id"])
def test_a_plain_id_is_printed_bare(rid):
    assert shown_id(rid) == rid


@pytest.mark.parametrize("rid, expected", [
    ("a\nb", "'a\\nb'"),
    ("\u202eevil", "'\\u202eevil'"),
    ("a: field b", "'a: field b'"),   # cannot pose as the message's own separator
    (" padded", "' padded'"),
    (7, "7"),
])
def test_any_other_id_is_quoted_and_escaped(rid, expected):
    assert shown_id(rid) == expected


def test_a_long_id_is_cut():
    out = shown_id("a" * 10_000)
    assert len(out) <= 64 and out.endswith("(10000 chars)")


def test_one_line_leaves_a_plain_line_alone_and_escapes_the_rest():
    plain = "fixtures/x.yaml: record n1: field at: invalid date (value '2030-01-32')"
    assert one_line(plain) == plain
    assert one_line("first\nsecond\u202e") == "first\\nsecond\\u202e"
    long = one_line("z" * 100_000)
    assert len(long) <= 500 and long.endswith(f"{ELLIPSIS} (100000 chars)")


@given(st.text(), st.integers(min_value=0, max_value=600))
def test_one_line_is_one_bounded_line_for_any_text(text, limit):
    out = one_line(text, limit)
    assert len(out) <= max(limit, 20)
    assert hidden_chars(out) == []


# --- garden.formats.yaml_reader: the reader's bounds -------------------------------------------


def refusal(path: Path) -> str:
    start = time.perf_counter()
    with pytest.raises(GardenError) as info:
        read_yaml(path)
    assert time.perf_counter() - start < SECONDS
    assert len(info.value.messages) == 1
    return info.value.messages[0]


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    text = story_text("x", top=bomb())
    assert len(text.encode()) < 500
    msg = refusal(write(tmp_path, text))
    assert re.match(rf"{re.escape(str(tmp_path / 'x.yaml'))}:\d+:\d+: aliases expand past", msg), msg
    assert len(msg) < 300


def test_a_bomb_of_few_aliases_is_still_refused(tmp_path):
    # 72 alias uses in all: a bound on the count of aliases alone would let this through
    text = bomb(levels=9)
    assert text.count("*") == 72
    assert "aliases expand past" in refusal(write(tmp_path, text))


def test_aliases_to_one_long_scalar_count_its_characters(tmp_path):
    text = "a: &a " + "w" * 20_000 + "\nb: [" + ", ".join(["*a"] * 10) + "]\n"
    assert "aliases expand past" in refusal(write(tmp_path, text))


def test_ordinary_anchors_and_merges_still_load(tmp_path):
    text = ("base: &base {kind: note, project: p}\n"
            "tags: &tags [gaming, food]\n"
            "one: {<<: *base, topics: *tags}\n"
            "two: {<<: *base, topics: *tags}\n")
    data = read_yaml(write(tmp_path, text))
    assert data["one"] == {"kind": "note", "project": "p", "topics": ["gaming", "food"]}
    assert data["two"]["topics"] == ["gaming", "food"]


def test_an_alias_inside_the_node_it_names_is_refused(tmp_path):
    msg = refusal(write(tmp_path, "a: &a [1, *a]\n"))
    assert msg == f"{tmp_path / 'x.yaml'}:1:11: alias *a is inside the node it names"


def test_nesting_past_the_bound_is_refused_with_its_location(tmp_path):
    msg = refusal(write(tmp_path, "records: " + "[" * 500 + "]" * 500 + "\n"))
    # the document's own mapping is the first level, so the 64th `[` (column 9 + 64) is refused
    assert msg == f"{tmp_path / 'x.yaml'}:1:{9 + MAX_DEPTH}: nested more than {MAX_DEPTH} levels deep"


def test_nesting_built_by_chaining_aliases_is_refused(tmp_path):
    # each line nests the previous one 60 levels deeper: few aliases, little expansion,
    # yet building the last value (here as a mapping key) would exhaust the stack
    lines = [f"n{k}: &n{k} " + "[" * 60 + (f"*n{k - 1}" if k else "x") + "]" * 60 for k in range(30)]
    msg = refusal(write(tmp_path, "\n".join(lines) + "\n? *n29\n: 1\n"))
    assert msg == f"{tmp_path / 'x.yaml'}:2:69: nested more than {MAX_DEPTH} levels deep once alias *n0 is expanded"


def test_a_stack_overflow_while_reading_is_still_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_mod, "MAX_DEPTH", 100_000)  # take the bound away to reach the safety net
    path = write(tmp_path, "x: " + "[" * 5000 + "]" * 5000 + "\n")
    assert refusal(path) == f"{path}: nested too deeply to read"


def test_nesting_within_the_bound_loads(tmp_path):
    depth = MAX_DEPTH - 1  # lists inside the document's mapping
    data = read_yaml(write(tmp_path, "x: " + "[" * depth + "1" + "]" * depth + "\n"))["x"]
    for _ in range(depth):
        data = data[0]
    assert data == 1


@pytest.mark.parametrize("value, tag", [
    ("!!timestamp 2030-02-30", "!!timestamp"),
    ("!!float hi", "!!float"),
    ("!!int 12", "!!int"),
    ("!!str plain", "!!str"),
    ("!custom thing", "!custom"),
    ("!!map {a: 1}", "!!map"),
    ("! bare", "!"),
])
def test_explicit_tags_are_refused_with_their_location(tmp_path, value, tag):
    msg = refusal(write(tmp_path, f"story: x\nat: {value}\n"))
    assert msg.startswith(f"{tmp_path / 'x.yaml'}:2:5: explicit YAML tags are not accepted (tag '{tag}')"), msg


def test_an_implicit_date_is_still_text_for_validation_to_locate(tmp_path):
    assert read_yaml(write(tmp_path, "at: 2030-02-30\n")) == {"at": "2030-02-30"}


def test_an_integer_too_long_to_convert_is_a_located_error(tmp_path):
    msg = refusal(write(tmp_path, "n: " + "1" * 5000 + "\n"))
    assert msg.startswith(f"{tmp_path / 'x.yaml'}:1:4: malformed YAML: cannot read '1111")
    assert "(5000 chars) as !!int" in msg and len(msg) < 300


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_mod, "MAX_FILE_BYTES", 1000)
    path = write(tmp_path, "k: " + "v" * 1997 + "\n")
    assert refusal(path) == f"{path}: file is 2,001 bytes; a YAML file may have at most 1,000 bytes"


def test_an_endless_device_is_refused_before_a_byte_is_read(monkeypatch):
    zero = Path("/dev/zero")
    if not zero.exists():
        pytest.skip("no /dev/zero here")
    monkeypatch.setattr(yaml_mod, "MAX_FILE_BYTES", 1000)
    assert refusal(zero) == f"{zero}: is a character device, not a regular file; refused"


def test_a_control_character_is_located_by_line_and_column(tmp_path):
    msg = refusal(write(tmp_path, "a: 1\nb: x\x00y\n"))
    assert msg == f"{tmp_path / 'x.yaml'}:2:5: malformed YAML: character '\\x00' is not allowed in YAML text"


def test_text_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"a: caf\xe9\n")
    assert refusal(path) == f"{path}: cannot read: not UTF-8 text (byte 7 is 0xe9)"


def test_a_long_duplicate_key_is_cut(tmp_path):
    key = "k" * 50_000
    msg = refusal(write(tmp_path, f"? {key}\n: 1\n? {key}\n: 2\n"))
    assert "duplicate key 'kkk" in msg and "(50000 chars)" in msg and len(msg) < 300


def test_a_pydantic_message_shows_a_bounded_escaped_value():
    field, message = describe_pydantic_error(
        {"type": "string_type", "loc": ("records", 0, "ti\ntle"), "msg": "Input should be a valid string",
         "input": list(range(1_000_000))})
    assert field == "records.0.'ti\\ntle'"
    assert message.endswith("(1000000 items))") and len(message) < 200


# --- garden.formats.stories: messages stay one bounded line -------------------------------


def test_every_story_message_is_one_line_however_many_problems(tmp_path, monkeypatch):
    monkeypatch.setattr(stories_mod, "MAX_PROBLEMS", 5)
    records = "records:\n" + "".join(f"  - {{id: n{i}, kind: note}}\n" for i in range(12))
    path = write(tmp_path, story_text("x", records=records))
    with pytest.raises(StoryError) as info:
        load_story(path)
    assert len(info.value.messages) == 6
    assert info.value.messages[-1] == f"{path}: 7 more problems not listed"


def test_a_long_supersession_chain_is_checked_in_linear_time():
    n = 3000
    records = [Record(id=f"d{i:05}", kind="decision", text="t", superseded_by=f"d{i + 1:05}") for i in range(n)]
    records.append(Record(id=f"d{n:05}", kind="decision", text="t", superseded_by="d00000"))
    story = Story(story="x", project="x", records=records)
    start = time.perf_counter()
    errors = semantic_errors(story, Path("x.yaml"))
    assert time.perf_counter() - start < SECONDS
    assert errors == [f"x.yaml: record d00000: field superseded_by: supersession cycle "
                      f"d00000 -> d00001 -> d00002 -> d00003 -> d00004 -> d00005 -> {ELLIPSIS} (2995 more) -> d00000"]


def test_a_cycle_is_named_from_its_smallest_id_whoever_enters_it():
    records = [Record(id="a.in", kind="decision", text="t", superseded_by="z.c"),
               Record(id="z.c", kind="decision", text="t", superseded_by="m.b"),
               Record(id="m.b", kind="decision", text="t", superseded_by="z.c")]
    errors = semantic_errors(Story(story="x", project="x", records=records), Path("x.yaml"))
    assert errors == ["x.yaml: record m.b: field superseded_by: supersession cycle m.b -> z.c -> m.b"]


# --- the command line --------------------------------------------------------------


@pytest.fixture
def garden_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    monkeypatch.setenv("GARDEN_HOME", str(home))
    (tmp_path / "fixtures").mkdir()
    return home


def check(tmp_path, capsys, name: str, text: str) -> tuple[int, str, Path]:
    path = tmp_path / "fixtures" / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    start = time.perf_counter()
    code = main(["check", name])  # anything but a GardenError escapes and fails the test
    elapsed = time.perf_counter() - start
    out, err = capsys.readouterr()
    printed = out + err
    assert code in (1, 2), printed
    assert elapsed < SECONDS
    assert len(printed.encode()) < OUTPUT_BOUND
    assert hidden_chars(printed.replace("\n", "")) == []
    problems = [line for line in printed.splitlines() if "stories checked" not in line]
    assert problems and all(f"{name}.yaml" in line for line in problems), printed
    return code, "\n".join(problems), path


def nothing_indexed(home: Path) -> bool:
    index = home / "index"
    return not index.exists() or not any(index.iterdir())


LOCATED = r"{name}\.yaml:\d+:\d+: "


@pytest.mark.parametrize("name, text, words", [
    ("bomb-top", story_text("bomb-top", top=bomb()), "aliases expand past"),
    ("bomb-topics", story_text("bomb-topics", top="topics:\n" + bomb(indent="  ")), "aliases expand past"),
    ("deep", story_text("deep", records="records: " + "[" * 500 + "]" * 500 + "\n"), "nested more than"),
    ("timestamp", story_text("timestamp", top="reviewed_at: !!timestamp 2030-02-30\n"), "explicit YAML tags"),
    ("float", story_text("float", top="title: !!float hi\n"), "explicit YAML tags"),
    ("bigint", story_text("bigint", top="title: " + "9" * 5000 + "\n"), "malformed YAML: cannot read"),
])
def test_check_refuses_hostile_yaml_with_one_located_line(tmp_path, capsys, garden_home, name, text, words):
    _, problems, _ = check(tmp_path, capsys, name, text)
    assert len(problems.splitlines()) == 1, problems
    assert re.search(LOCATED.format(name=re.escape(name)) + re.escape(words), problems), problems
    assert nothing_indexed(garden_home)


def test_check_refuses_an_oversized_story(tmp_path, capsys, garden_home, monkeypatch):
    monkeypatch.setattr(yaml_mod, "MAX_FILE_BYTES", 2000)
    text = story_text("big", records="records:\n" + "  - {id: n1, kind: note, text: hello}\n" * 100)
    _, problems, path = check(tmp_path, capsys, "big", text)
    size = len(text.encode())
    assert f"{path}: file is {size:,} bytes; a YAML file may have at most 2,000 bytes" in problems
    assert nothing_indexed(garden_home)


RECORD = "  - {{id: {rid}, kind: note, text: hello{extra}}}\n"


@pytest.mark.parametrize("name, rid, extra, needle", [
    ("newline-id", '"a\\nb"', "", "record 'a\\nb': field id:"),
    ("rtl-id", '"\\u202Eevil"', "", "record '\\u202eevil': field id:"),
    ("rtl-label", "n1", ', topics: ["gam\\u202Eing"]', "record n1: field topics: 'gam\\u202eing' is not"),
    ("newline-ref", "n1", ', sources: ["x\\ny"]', "record n1: field sources: 'x\\ny' names no record"),
])
def test_check_prints_a_hostile_id_or_value_escaped_on_one_line(tmp_path, capsys, garden_home, name, rid, extra,
                                                                needle):
    text = story_text(name, records="records:\n" + RECORD.format(rid=rid, extra=extra))
    code, problems, path = check(tmp_path, capsys, name, text)
    assert code == 1
    lines = problems.splitlines()
    assert all(line.startswith(str(path)) for line in lines), problems
    assert any(needle in line for line in lines), problems
    assert "\u202e" not in problems
    assert nothing_indexed(garden_home)


@pytest.mark.parametrize("name, extra, needle", [
    ("huge-unknown", ", titel: " + "t" * 100_000, "record n1: field titel: unknown field (value 'ttt"),
    ("huge-bad-type", ", private: " + "t" * 100_000, "record n1: field private: Input should be a valid boolean"),
    ("huge-label", ", topics: [" + "t" * 100_000 + "]", "record n1: field topics: 'ttt"),
])
def test_check_cuts_a_huge_value_to_the_bound(tmp_path, capsys, garden_home, name, extra, needle):
    text = story_text(name, records="records:\n" + RECORD.format(rid="n1", extra=extra))
    code, problems, _ = check(tmp_path, capsys, name, text)
    assert code == 1 and len(problems.splitlines()) == 1, problems
    assert needle in problems and "(100000 chars)" in problems
    assert len(problems) < 400
    assert nothing_indexed(garden_home)


def test_check_bounds_a_huge_id(tmp_path, capsys, garden_home):
    rid = "i" * 100_000  # a valid id, written twice
    text = story_text("huge-id", records="records:\n" + RECORD.format(rid=rid, extra="") * 2)
    code, problems, _ = check(tmp_path, capsys, "huge-id", text)
    assert code == 1 and len(problems.splitlines()) == 1
    assert "field id: duplicate id 'iii" in problems and "(100000 chars)" in problems
    assert nothing_indexed(garden_home)


def test_run_refuses_a_case_file_holding_an_alias_bomb(tmp_path, capsys, garden_home):
    (tmp_path / "regression").mkdir()
    case = tmp_path / "regression" / "bomb.yaml"
    case.write_text("id: bomb\nstory: tiny\nquery: hello\n" + bomb(), encoding="utf-8")
    start = time.perf_counter()
    code = main(["run", "regression/bomb.yaml"])
    assert time.perf_counter() - start < SECONDS
    out, err = capsys.readouterr()
    assert code == 2
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.search(r"regression/bomb\.yaml:\d+:\d+: aliases expand past", lines[0]), lines
    assert len(lines[0]) < 300


def test_a_file_read_again_is_a_fresh_copy_of_what_it_holds_now(tmp_path):
    """Parses are kept by text: a changed file is read anew, and what one caller changes in
    the value it was given never reaches the next caller."""
    path = tmp_path / "s.yaml"
    path.write_text("records:\n  - id: a\n    tags: [x, y]\n")
    first = read_yaml(path)
    first["records"][0]["tags"].append("changed by the caller")
    first["added"] = True
    assert read_yaml(path) == {"records": [{"id": "a", "tags": ["x", "y"]}]}
    path.write_text("records:\n  - id: b\n")
    assert read_yaml(path) == {"records": [{"id": "b"}]}


def test_kept_parses_stay_within_their_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_mod, "_parsed", type(yaml_mod._parsed)())
    monkeypatch.setattr(yaml_mod, "_parsed_bytes", 0)
    monkeypatch.setattr(yaml_mod, "MAX_PARSED_BYTES", 2000)
    for n in range(40):
        path = tmp_path / f"s{n}.yaml"
        path.write_text(f"records:\n  - id: r{n}\n    text: {'w' * 100}\n")
        assert read_yaml(path)["records"][0]["id"] == f"r{n}"
    assert 0 < len(yaml_mod._parsed) < 40
    assert yaml_mod._parsed_bytes == sum(map(len, yaml_mod._parsed.values())) <= 2000
    assert read_yaml(tmp_path / "s39.yaml")["records"][0]["id"] == "r39"   # the newest is kept
