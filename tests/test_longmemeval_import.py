"""`garden import longmemeval`: LongMemEval questions (Wu et al., ICLR 2025, "LongMemEval:
Benchmarking Chat Assistants on Long-Term Interactive Memory"; MIT) as stories and cases
that `garden check` and `garden run` accept as written.

The released files are not shipped. Every file here is fictional, written by the tests in
the released schema: a made-up potter, Ilse Marrow, talks with an assistant about her
studio and a trip to the made-up island of Varnholm. The files carry each quirk of the
real ones.
"""
from __future__ import annotations

import copy
import datetime as dt
import gzip
import io
import json
from pathlib import Path

import pytest
import yaml

from garden.cli import main
from garden.errors import GardenError
from garden.formats.cases import load_case
from garden.formats.json_stream import _Reader, iter_json_list
from garden.formats.longmemeval import allocate, import_longmemeval, parse_date, session_title, slug, stratified_sample
from garden.formats.stories import load_story
from filetree import tree
from longmemeval_files import SHARED_ID, fictional, stamp, turn, write


def records_of(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[1:]]


# --- units -----------------------------------------------------------------------------


def test_parse_date_reads_the_released_stamp():
    assert parse_date("2023/05/30 (Tue) 23:40") == dt.datetime(2023, 5, 30, 23, 40)
    assert parse_date("2023/02/29 (Wed) 10:00") is None          # no such day
    assert parse_date("2023/05/30 (Tue) 24:10") is None
    assert parse_date("2023-05-30 23:40") is None
    assert parse_date(20230530) is None and parse_date("9" * 10_000) is None


def test_slug_keeps_clean_ids_and_keeps_ids_apart_that_differ_only_in_case():
    assert slug("answer_4be1b6b4_2") == "answer_4be1b6b4_2"
    upper, lower = slug("sharegpt_Clay9Xq_0"), slug("sharegpt_clay9xq_0")
    assert lower == "sharegpt_clay9xq_0" and upper.startswith("sharegpt_clay9xq_0-") and upper != lower
    assert "." not in upper and slug("sharegpt_Clay9Xq_0") == upper           # the same in every story
    assert len(slug("a" * 300)) <= 64 and slug("a" * 300) != slug("a" * 301)
    assert session_title("answer_pot_1") == session_title("answer_pot_1")
    assert "answer" not in session_title("answer_pot_1")


def test_allocate_is_proportional_with_one_per_type_when_it_can():
    assert allocate({"a": 70, "b": 20, "c": 10}, 10) == {"a": 7, "b": 2, "c": 1}
    assert allocate({"a": 70, "b": 20, "c": 10}, 5) == {"a": 3, "b": 1, "c": 1}
    assert allocate({"a": 98, "b": 1, "c": 1}, 3) == {"a": 1, "b": 1, "c": 1}
    assert allocate({"a": 5, "b": 5, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    assert allocate({"a": 2, "b": 1}, 50) == {"a": 2, "b": 1}
    for n in range(1, 30):
        assert sum(allocate({"a": 13, "b": 7, "c": 3, "d": 1}, n).values()) == min(n, 24)


def test_stratified_sample_ignores_file_order_and_follows_the_seed():
    keys = [(f"ms_{i:02d}", "multi-session") for i in range(12)] + [(f"ku_{i:02d}", "knowledge-update")
                                                                      for i in range(4)]
    first = stratified_sample(keys, 4, seed=1)
    assert first == stratified_sample(list(reversed(keys)), 4, seed=1)
    assert sum(q.startswith("ms_") for q in first) == 3 and sum(q.startswith("ku_") for q in first) == 1
    assert len({frozenset(stratified_sample(keys, 4, seed=s)) for s in range(10)}) > 1


# --- the streaming reader ----------------------------------------------------------------------


TRICKY = [
    {"a": "split \"quoted\" \\ text \u00e9\u4e2d \ud83c\udffa", "n": 12345678901234567890, "f": -1.5e-7},
    [1, 22, 333, 4444, True, False, None, {"deep": [[[{"x": "y"}]]]}],
    "a plain string, with [brackets] and {braces}, and a comma",
    1234567,
    {"escapes": "\\u0041 \n \t \u2028", "empty": {}, "list": []},
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_the_reader_on_a_tiny_buffer_yields_what_json_load_does(chunk):
    for text in (json.dumps(TRICKY), json.dumps(TRICKY, indent=2), json.dumps(fictional(), indent=1),
                 " \n[]\n ", json.dumps(TRICKY, ensure_ascii=False)):
        got = [value for _, value, _ in iter_json_list(io.StringIO(text), "t.json", chunk_chars=chunk)]
        assert got == json.load(io.StringIO(text))


def test_the_reader_holds_one_record_not_the_file():
    records = [{"question_id": f"q{i}", "pad": "x" * 200} for i in range(500)]
    text = json.dumps(records)
    reader = _Reader(io.StringIO(text), "t.json", chunk_chars=32, max_item_chars=10_000)
    biggest = 0
    for _, value, _ in reader.items():
        biggest = max(biggest, len(reader.text))
    one = len(json.dumps(records[0]))
    assert biggest <= 3 * one < len(text) // 100


def test_the_reader_reports_keys_written_twice():
    text = '[{"a": 1, "a": 2}, {"b": {"c": 1, "c": 1}}]'
    assert [dups for _, _, dups in iter_json_list(io.StringIO(text), "t.json", chunk_chars=4)] == [["a"], ["c"]]


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("[", "ends inside the list"),
    ('[{"a": 1}', "before the list is closed"),
    ('[{"a": 1},', "where question #1 should begin"),
    ('[{"a": 1},]', "a ',' with no question record"),
    ('[{"a": "unterminated', "truncated"),
    ('[{"a": 1}] x', "extra data after the list"),
    ('{"a": 1}', "not an object"),
    ("[1 2]", "expecting ',' or ']'"),
    ('[{"a": tru}, {"b": 2}]', "question #0"),
    ("[" * 100_000, "nested too deeply"),
])
def test_the_reader_locates_bad_json(text, needle):
    with pytest.raises(GardenError) as exc:
        list(iter_json_list(io.StringIO(text), "t.json", chunk_chars=3))
    assert needle in exc.value.messages[0] and exc.value.messages[0].startswith("t.json")


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_the_reader_locates_an_error_where_json_does(chunk):
    text = json.dumps(fictional(), indent=2)
    at = text.index('"knowledge-update"')
    text = text[:at] + "knowledge-update" + text[at + len('"knowledge-update"'):]    # a bare word
    with pytest.raises(json.JSONDecodeError) as want:
        json.loads(text)
    with pytest.raises(GardenError) as got:
        list(iter_json_list(io.StringIO(text), "t.json", chunk_chars=chunk))
    assert got.value.messages[0].startswith(f"t.json:{want.value.lineno}:{want.value.colno}: not JSON: "
                                            f"{want.value.msg} (in question #3)")


def test_the_reader_bounds_one_record():
    text = json.dumps([{"pad": "x" * 5000}])
    with pytest.raises(GardenError) as exc:
        list(iter_json_list(io.StringIO(text), "t.json", chunk_chars=64, max_item_chars=1000))
    assert "longer than 1,000 characters" in exc.value.messages[0]


# --- the fictional file --------------------------------------------------------------------


def test_import_maps_turns_sessions_and_judgments(home, capsys):
    src = write(home / "lme.json", fictional())
    assert main(["import", "longmemeval", str(src), "--out", str(home / "out")]) == 0
    printed = capsys.readouterr().out
    assert "lme.json: 4 questions read, 4 imported" in printed
    assert "abstention questions (expect unanswerable): 1" in printed
    assert "unjudged questions (no evidence turn, not abstention; written with an empty expect): 1: studio_rent_04" \
        in printed
    assert "evidence turns: 2 (1 of them the assistant's)" in printed
    assert "sessions: 6 distinct in 7 slots" in printed
    assert "1 turns with blank content" in printed
    assert "1 turns marked has_answer outside the question's evidence sessions, not judged" in printed
    assert "4 questions imported into" in printed

    out = home / "out"
    assert sorted(p.name for p in (out / "fixtures").iterdir()) == [
        "longmemeval-kiln_talk_02.jsonl", "longmemeval-pot_glaze_01.jsonl", "longmemeval-studio_rent_04.jsonl",
        "longmemeval-trip_ferry_03_abs.jsonl"]
    header = json.loads((out / "fixtures/longmemeval-pot_glaze_01.jsonl").read_text().splitlines()[0])
    assert header["story"] == header["project"] == "longmemeval-pot_glaze_01"
    assert header["addressee"] == "assistant"       # a question's "you"
    assert header["entities"] == {"assistant": {"name": "assistant", "aliases": ["assistant"]},
                                  "user": {"name": "user", "aliases": ["user"]}}
    recs = records_of(out / "fixtures/longmemeval-pot_glaze_01.jsonl")
    shared = slug(SHARED_ID)
    assert [r["id"] for r in recs] == [f"{shared}.1", f"{shared}.2", "answer_pot_1.1", "answer_pot_1.2",
                                       "answer_pot_1.3"]                  # the blank turn 4 is left out
    glaze = recs[4]
    assert glaze == {"id": "answer_pot_1.3", "kind": "source", "at": "2023-05-20",
                     "title": session_title("answer_pot_1"),
                     "text": "I picked a pale celadon glaze for the teapot.", "speaker": "user"}
    # a session's turns share title and date (neighbours); no raw session id or role in the indexed text
    assert len({(r["title"], r["at"]) for r in recs[2:]}) == 1 and recs[0]["title"] != recs[2]["title"]
    assert all("answer" not in r["title"] and not r["text"].startswith(("user", "assistant")) for r in recs)

    case = yaml.safe_load((out / "cases/longmemeval-pot_glaze_01/pot_glaze_01.yaml").read_text())
    assert case["id"] == "pot_glaze_01" and case["story"] == "../../fixtures/longmemeval-pot_glaze_01.jsonl"
    assert case["as_of"] == dt.date(2023, 5, 30) and case["category"] == "single-session-user"
    assert case["query"] == "What glaze did I pick for the teapot?"
    assert case["expect"] == {"include": ["answer_pot_1.3"]}          # has_answer false is no evidence
    assert "evidence sessions: answer_pot_1" in case["about"] and "answer: celadon" in case["about"]
    assert "LongMemEval (Wu et al., ICLR 2025" in case["origin"] and "lme.json" in case["origin"]

    kiln = yaml.safe_load((out / "cases/longmemeval-kiln_talk_02/kiln_talk_02.yaml").read_text())
    assert kiln["expect"] == {"include": ["answer_kiln_1.2"]}          # the assistant's turn
    assert "answer: 1220" in kiln["about"]
    abstain = yaml.safe_load((out / "cases/longmemeval-trip_ferry_03_abs/trip_ferry_03_abs.yaml").read_text())
    assert abstain["expect"] == {"unanswerable": True} and "abstention" in abstain["about"]
    unjudged = yaml.safe_load((out / "cases/longmemeval-studio_rent_04/studio_rent_04.yaml").read_text())
    assert unjudged["expect"] == {} and "evidence sessions: answer_studio_2" in unjudged["about"]


def test_a_repeated_session_is_the_same_records_in_every_story(home):
    src = write(home / "lme.json", fictional())
    import_longmemeval(src, home / "out")
    shared = slug(SHARED_ID)

    def of(name: str) -> list[dict]:
        return [r for r in records_of(home / "out/fixtures" / f"{name}.jsonl") if r["id"].startswith(shared + ".")]

    one, two = of("longmemeval-pot_glaze_01"), of("longmemeval-kiln_talk_02")
    assert len(one) == 2
    # the same ids, texts and titles (what the embedding cache keys), each haystack its own date
    assert [(r["id"], r["text"], r["title"], r["speaker"]) for r in one] == \
           [(r["id"], r["text"], r["title"], r["speaker"]) for r in two]
    assert one[0]["at"] == "2023-05-02" and two[0]["at"] == "2023-06-03"


def test_the_other_quirks_are_handled_and_counted(home):
    data = fictional()
    trip = data[2]
    trip["haystack_session_ids"] += ["answer_trip_1", "later_1"]     # a slot repeated, a session after the question
    trip["haystack_dates"] += [stamp(2023, 7, 2), stamp(2023, 7, 20)]
    trip["haystack_sessions"] += [[turn("user", "A different text under the same id.")],
                                  [turn("user", "Back from Varnholm \ud83d with a bag of beach clay.")]]
    data[0]["haystack_sessions"][1][0]["extra_key"] = "ignored"   # unknown keys are read past
    src = write(home / "lme.json", data)
    report = import_longmemeval(src, home / "out")
    printed = "\n".join(report.lines())
    assert "1 sessions repeated inside one haystack, kept once" in printed
    assert "1 session slots dated after their question" in printed
    assert "1 texts with a lone surrogate escape, replaced by U+FFFD" in printed
    recs = records_of(home / "out/fixtures/longmemeval-trip_ferry_03_abs.jsonl")
    assert [r["id"] for r in recs] == ["answer_trip_1.1", "answer_trip_1.2", "later_1.1"]
    assert recs[0]["text"].startswith("I took the morning ferry") and "\ufffd" in recs[2]["text"]
    assert recs[2]["at"] == "2023-07-20"
    assert report.to_json()["read"] == {"single-session-user": 1, "single-session-assistant": 1,
                                        "temporal-reasoning": 1, "knowledge-update": 1}


def test_imported_stories_and_cases_load_check_and_run(home, capsys):
    src = write(home / "lme.json", fictional())
    import_longmemeval(src, home)
    for story in sorted((home / "fixtures").iterdir()):
        assert load_story(story).story == story.stem
        assert main(["check", str(story)]) == 0
    cases = sorted((home / "cases").rglob("*.yaml"))
    assert len(cases) == 4
    for path in cases:
        loaded = load_case(path)
        assert loaded.suite == "cases"                                    # judgments, never regression
    capsys.readouterr()
    assert main(["run", "cases", "--pipeline", "bm25s", "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert len(report["results"]) == 4


def test_gzip_and_plain_give_the_same_bytes_and_runs_repeat(home):
    (home / "plain").mkdir()
    (home / "gz").mkdir()
    write(home / "plain" / "lme.json", fictional())
    write(home / "gz" / "lme.json.gz", fictional(), gz=True)
    import_longmemeval(home / "plain/lme.json", home / "a")
    import_longmemeval(home / "gz/lme.json.gz", home / "b", chunk_chars=5)
    first = tree(home / "a")
    assert len(first) == 8 and first == tree(home / "b")
    import_longmemeval(home / "plain/lme.json", home / "a")              # over its own output: same bytes
    assert tree(home / "a") == first
    assert not any(p.name.startswith(".longmemeval-import") for p in (home / "a").iterdir())


def test_reimport_replaces_only_its_own_files(home):
    src = write(home / "lme.json", fictional())
    out = home / "out"
    (out / "fixtures").mkdir(parents=True)
    (out / "cases/longmemeval-pot_glaze_01").mkdir(parents=True)
    (out / "fixtures/aurora.yaml").write_text("not ours\n")
    (out / "fixtures/longmemeval-pot_glaze_01.yaml").write_text("an older form of ours\n")
    (out / "cases/longmemeval-pot_glaze_01/stale.yaml").write_text("a question no longer in the data\n")
    (out / "notes.txt").write_text("mine\n")
    import_longmemeval(src, out)
    assert (out / "fixtures/aurora.yaml").read_text() == "not ours\n"
    assert (out / "notes.txt").read_text() == "mine\n"
    assert not (out / "fixtures/longmemeval-pot_glaze_01.yaml").exists()
    assert sorted(p.name for p in (out / "cases/longmemeval-pot_glaze_01").iterdir()) == ["pot_glaze_01.yaml"]


# --- sampling ------------------------------------------------------------------------


def many() -> list[dict]:
    """Nine questions of two types, built from the fictional ones: six multi-session and
    three single-session-user, each with its own id."""
    base = fictional()[0]
    out = []
    for i in range(9):
        q = copy.deepcopy(base)
        q["question_id"] = f"{'ms' if i < 6 else 'ssu'}_{i:02d}"
        q["question_type"] = "multi-session" if i < 6 else "single-session-user"
        out.append(q)
    return out


def test_sample_is_stratified_deterministic_and_independent_of_file_order(home, capsys):
    src = write(home / "lme.json", many())
    assert main(["import", "longmemeval", str(src), "--out", "a", "--sample", "3", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "9 questions read, 3 imported (a sample stratified by type: 3 questions, seed 1)" in printed
    assert "multi-session: 2 of 6" in printed and "single-session-user: 1 of 3" in printed
    picked = sorted(p.name for p in (home / "a/cases").iterdir())
    assert sum(n.startswith("longmemeval-ms_") for n in picked) == 2 and len(picked) == 3
    write(home / "reversed.json", list(reversed(many())))
    assert main(["import", "longmemeval", "reversed.json", "--out", "b", "--sample", "3", "--seed", "1"]) == 0
    assert sorted(p.name for p in (home / "b/cases").iterdir()) == picked
    # the same records; only the header and the case cite the file by its name
    assert {n: records_of(home / "a/fixtures" / f"{n}.jsonl") for n in picked} == \
           {n: records_of(home / "b/fixtures" / f"{n}.jsonl") for n in picked}


def test_sample_2_seed_1_on_the_fictional_file(home, capsys):
    src = write(home / "lme.json", many())
    assert main(["import", "longmemeval", str(src), "--out", "a", "--sample", "2", "--seed", "1"]) == 0
    assert main(["import", "longmemeval", str(src), "--out", "b", "--sample", "2", "--seed", "1"]) == 0
    assert tree(home / "a") == tree(home / "b")
    names = sorted(p.name for p in (home / "a/cases").iterdir())
    assert [n.split("_")[0] for n in names] == ["longmemeval-ms", "longmemeval-ssu"]   # one of each type


@pytest.mark.parametrize("args, needle", [
    (["locomo", "{src}", "--sample", "2"], "--sample: only for longmemeval"),
    (["locomo", "{src}", "--seed", "3"], "--seed: only for longmemeval"),
    (["longmemeval", "{src}", "--seed", "3"], "--seed: draws a sample, so it needs --sample N"),
])
def test_sample_options_are_refused_where_they_mean_nothing(home, capsys, args, needle):
    src = write(home / "lme.json", fictional())
    argv = ["import"] + [a.replace("{src}", str(src)) for a in args] + ["--out", "out"]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err
    assert not (home / "out").exists()


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_a_bad_sample_size_is_a_usage_error(home, capsys, value):
    src = write(home / "lme.json", fictional())
    with pytest.raises(SystemExit) as exc:
        main(["import", "longmemeval", str(src), "--sample", value])
    assert exc.value.code == 2


# --- hostile input: located lines, exit 2, nothing written ------------------------------------


def broken(change) -> list[dict]:
    data = fictional()
    change(data)
    return data


def _drop(key):
    return lambda d: d[1].pop(key)


def _set(index, key, value):
    return lambda d: d[index].__setitem__(key, value)


HOSTILE = [
    ("wrong type", broken(_set(1, "question_type", 7)),
     "question #1 (kiln_talk_02): field question_type: must be one of"),
    ("not a list", broken(_set(0, "haystack_session_ids", "answer_pot_1")),
     "question #0 (pot_glaze_01): field haystack_session_ids: must be a list"),
    ("answer a bool", broken(_set(2, "answer", True)),
     "question #2 (trip_ferry_03_abs): field answer: must be a string or a number (value True)"),
    ("missing key", broken(_drop("answer_session_ids")),
     "question #1 (kiln_talk_02): field answer_session_ids: required field is missing"),
    ("unequal lists", broken(lambda d: d[0]["haystack_dates"].pop()),
     "question #0 (pot_glaze_01): field haystack_dates: 1 dates for 2 session ids"),
    ("unknown role", broken(lambda d: d[3]["haystack_sessions"][1][0].__setitem__("role", "system")),
     "question #3 (studio_rent_04): field haystack_sessions[1][0].role: must be 'user' or 'assistant' "
     "(value 'system')"),
    ("bad has_answer", broken(lambda d: d[2]["haystack_sessions"][0][1].__setitem__("has_answer", "yes")),
     "field haystack_sessions[0][1].has_answer: must be true or false"),
    ("bad date", broken(_set(2, "question_date", "2023-07-09 12:00")),
     "question #2 (trip_ferry_03_abs): field question_date: not a date like"),
    ("bad session date", broken(lambda d: d[3]["haystack_dates"].__setitem__(1, "2023/02/30 (Thu) 11:00")),
     "question #3 (studio_rent_04): field haystack_dates[1]: not a date like"),
    ("a record not an object", broken(lambda d: d.append(["not", "a", "record"])),
     "question #4: must be an object with question_id"),
    ("a repeated question id", broken(lambda d: d.append(copy.deepcopy(d[0]))),
     "question #4 (pot_glaze_01): field question_id: 'pot_glaze_01' is also question #0"),
    ("a huge string", broken(_set(0, "question_date", "2023/05/30 " + "x" * 3_000_000)),
     "question #0 (pot_glaze_01): field question_date: not a date like"),
    ("a huge id", broken(_set(1, "question_id", "k" * 1_000_000)),
     "field question_id: must be a non-blank string of at most 256 characters"),
    ("a turn past a story line", broken(lambda d: d[0]["haystack_sessions"][1][0].__setitem__(
        "content", "clay " * 300_000)),
     "question #0 (pot_glaze_01): field haystack_sessions[1][0].content: the turn would be a story line"),
    ("a control character in the question", broken(_set(3, "question", "How much\x1b[2J is rent?")),
     "question #3 (studio_rent_04): case field query"),
]


@pytest.mark.parametrize("data, needle", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
def test_bad_records_exit_2_located_and_write_nothing(home, capsys, data, needle, gz):
    src = write(home / ("lme.json.gz" if gz else "lme.json"), data, gz=gz)
    (home / "out").mkdir()
    (home / "out/keep.txt").write_text("mine\n")
    before = tree(home / "out")
    assert main(["import", "longmemeval", str(src), "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert needle in err and f"garden: {src}: question #" in err
    assert all(len(line) < 1100 for line in err.splitlines())          # a huge value is shown cut
    assert tree(home / "out") == before and sorted(p.name for p in (home / "out").iterdir()) == ["keep.txt"]


VALID = json.dumps(fictional())
FILES = [
    ("a 1-byte file", b"[", "not JSON: the file ends inside the list"),
    ("a 1-byte non-list", b"7", "the top level must be a JSON list of question records, not a number"),
    ("an empty file", b"", "empty: a LongMemEval file is a JSON list"),
    ("a top-level dict", json.dumps(fictional()[0]).encode(),
     ":1:1: the top level must be a JSON list of question records, not an object"),
    ("truncated JSON", VALID[:len(VALID) // 2].encode(), "(truncated?)"),
    ("not JSON", b"[{'question_id': 'x'}]", ":1:3: not JSON: Expecting property name"),
    ("not UTF-8", b'[{"question_id": "\xff\xfe"}]', "not UTF-8 text"),
    ("a truncated gzip", gzip.compress(VALID.encode(), mtime=0)[:300], "the compressed stream ends early"),
    ("a bad gzip", b"\x1f\x8b\x08garbage", "cannot read"),
]


@pytest.mark.parametrize("content, needle", [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_bad_files_exit_2_located_and_write_nothing(home, capsys, content, needle):
    src = home / "lme.json"
    src.write_bytes(content)
    assert main(["import", "longmemeval", str(src), "--out", "out/nested"]) == 2
    err = capsys.readouterr().err
    assert needle in err and f"garden: {src}" in err
    assert not (home / "out").exists()


def test_truncated_json_names_the_question_it_ends_in(home, capsys):
    src = home / "lme.json"
    cut = VALID.index('"question_id": "trip_ferry_03_abs"') + 60
    src.write_text(VALID[:cut], encoding="utf-8")
    assert main(["import", "longmemeval", str(src), "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert f"{src}:1:" in err and "question #2" in err and "truncated" in err


def test_problems_are_bounded_and_the_rest_counted(home, capsys):
    data = [dict(q, question_type="chit-chat", question_id=f"bad_{i}") for i, q in enumerate(fictional() * 20)]
    src = write(home / "lme.json", data)
    assert main(["import", "longmemeval", str(src), "--out", "out"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 51 and err[-1] == f"garden: {src}: 30 more problems not listed"
    assert not (home / "out").exists()


def test_a_missing_file_and_a_file_as_out_are_bad_input(home):
    with pytest.raises(GardenError) as exc:
        import_longmemeval(home / "nowhere.json", home / "out")
    assert exc.value.status == 2 and "no such file" in exc.value.messages[0]
    src = write(home / "lme.json", fictional())
    (home / "taken").write_text("a file\n")
    with pytest.raises(GardenError) as exc:
        import_longmemeval(src, home / "taken")
    assert "`out` must be a folder" in exc.value.messages[0]  # the library names its parameter
