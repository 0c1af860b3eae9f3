"""Every reader of a file a user or another tool hands the garden, fed generated hostile
input: it returns what it read or refuses with GardenError (one located line per problem),
never another exception. Derandomized, so every machine runs the same examples."""
from __future__ import annotations

import json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from garden.errors import GardenError

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# JSON values of every type, small, with the strings a hostile file likes: empty, blank,
# control characters, lone surrogates (as JSON escapes), huge numbers
_STRINGS = st.one_of(st.sampled_from(["", " ", "\x00", "\x1b[2J", "2023/05/30 (Tue) 23:40", "user", "assistant",
                                      "answer_x", "D1:3", "1:56 pm on 8 May, 2023"]),
                     st.text(max_size=12))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=False), _STRINGS)
JSON_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(_STRINGS, inner, max_size=4)),
                           max_leaves=12)


def _longmemeval_record():
    """A record with each released field present or not, of the right type or not."""
    turn = st.fixed_dictionaries({"role": st.one_of(st.sampled_from(["user", "assistant"]), JSON_VALUES),
                                  "content": st.one_of(_STRINGS, JSON_VALUES)},
                                 optional={"has_answer": st.one_of(st.booleans(), JSON_VALUES)})
    fields = {
        "question_id": st.one_of(st.sampled_from(["q1", "q2_abs", "Q1"]), JSON_VALUES),
        "question_type": st.one_of(st.sampled_from(["multi-session", "temporal-reasoning"]), JSON_VALUES),
        "question": st.one_of(st.sampled_from(["What did I buy?"]), JSON_VALUES),
        "answer": JSON_VALUES,
        "question_date": st.one_of(st.sampled_from(["2023/05/30 (Tue) 23:40"]), JSON_VALUES),
        "haystack_session_ids": st.one_of(st.lists(st.sampled_from(["answer_a", "s1", "s1"]), max_size=3), JSON_VALUES),
        "haystack_dates": st.one_of(st.lists(st.sampled_from(["2023/05/01 (Mon) 10:00", "bad"]), max_size=3),
                                    JSON_VALUES),
        "haystack_sessions": st.one_of(st.lists(st.lists(turn, max_size=3), max_size=3), JSON_VALUES),
        "answer_session_ids": st.one_of(st.lists(st.sampled_from(["answer_a", "s1"]), max_size=2), JSON_VALUES),
    }
    return st.fixed_dictionaries({}, optional=fields)


@SETTINGS
@given(records=st.one_of(st.lists(_longmemeval_record(), max_size=3), JSON_VALUES))
def test_the_longmemeval_reader_imports_or_refuses(tmp_path_factory, records):
    from garden.formats.longmemeval import import_longmemeval

    root = tmp_path_factory.mktemp("lme")
    path = root / "longmemeval_s.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    try:
        report = import_longmemeval(path, root / "out")
    except GardenError as exc:
        assert exc.messages and all(m.startswith(str(path)) or "--out" in m for m in exc.messages)
        assert not (root / "out" / "fixtures").exists()
        return
    from garden.formats.stories import load_story

    written = sorted((root / "out" / "fixtures").glob("*.jsonl")) if report.questions else []
    assert len(written) == report.questions
    for story in written:               # what was written loads as `garden run` would load it
        load_story(story)


@SETTINGS
@given(data=JSON_VALUES)
def test_the_locomo_reader_builds_or_refuses(tmp_path_factory, data):
    from garden.formats.locomo import build, read_conversations

    root = tmp_path_factory.mktemp("locomo")
    path = root / "conv-x.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    try:
        for conv in read_conversations(path):
            build(conv)
    except GardenError as exc:
        assert exc.messages


@SETTINGS
@given(lines=st.lists(st.one_of(st.binary(max_size=40), JSON_VALUES.map(lambda v: json.dumps(v).encode())),
                      max_size=5))
def test_the_trace_reader_reads_or_skips_every_line(tmp_path_factory, lines):
    from garden.pipelines.traces import read_trace_lines

    path = tmp_path_factory.mktemp("trace") / "trace-2030-01-12.jsonl"
    path.write_bytes(b"\n".join(lines))
    assert isinstance(read_trace_lines(path), list)     # a bad line is skipped with a warning, never fatal


@SETTINGS
@given(lines=st.lists(st.one_of(st.binary(max_size=40), JSON_VALUES.map(lambda v: json.dumps(v).encode())),
                      min_size=1, max_size=4))
def test_the_json_lines_story_reader_loads_or_refuses(tmp_path_factory, lines):
    from garden.formats.stories import load_story

    folder = tmp_path_factory.mktemp("story") / "fixtures"
    folder.mkdir()
    path = folder / "gen.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        load_story(path)
    except GardenError as exc:
        assert exc.messages and all(str(path) in m or m.startswith(str(folder)) for m in exc.messages)


@SETTINGS
@given(text=st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["q1 0 a 1", "q1 0 b -1", "q1 0 c 9",
                                                                        "q1 Q0 d 2", "q1 0 e x"])), max_size=5))
def test_the_qrels_reader_reads_or_refuses_with_file_and_line(tmp_path_factory, text):
    from garden.evaluation.judgments import read_qrels

    path = tmp_path_factory.mktemp("qrels") / "x.qrels"
    path.write_text("\n".join(text), encoding="utf-8", errors="surrogatepass")
    try:
        grades = read_qrels(path)
    except GardenError as exc:
        assert exc.messages and all(m.startswith(str(path)) for m in exc.messages)
        return
    assert all(isinstance(g, int) for qrels in grades.values() for g in qrels.values())

