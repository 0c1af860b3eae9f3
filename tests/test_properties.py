"""Property-based tests of the command line against generated hostile input.

Four generators: story files, case files, query strings and pipeline options. For every
generated input the garden must answer without a traceback, exit 0, 1 or 2 only, keep its
output bounded, and write nothing (no index, no trace line) when it refuses the input.
Runs are derandomized, so every machine sees the same examples; EXAMPLES adds up to the
issue's floor of 2,000 generated examples per run, and `test_the_run_generated_enough`
checks that they really ran.
"""
from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from garden.cli import main
from garden.rerank.stages import LABELS, REASONS

ROOT = Path(__file__).resolve().parents[1]
STORY_IDS = [r["id"] for r in yaml.safe_load((ROOT / "fixtures" / "aurora-ridge.yaml").read_text())["records"]]

EXAMPLES = {"story": 550, "case": 450, "query": 550, "options": 450}
MAX_OUTPUT = 256 * 1024     # bytes of stdout and stderr together, for any one command
MAX_ERROR_LINE = 1200       # characters in one line of stderr
RAN: dict[str, int] = {name: 0 for name in EXAMPLES}


def profile(name: str):
    return settings(max_examples=EXAMPLES[name], deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One scratch project for the whole module: a copy of the shipped stories, its own
    garden home, as the working directory."""
    root = tmp_path_factory.mktemp("hostile")
    shutil.copytree(ROOT / "fixtures", root / "fixtures")
    (root / "regression").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("GARDEN_HOME", str(root / ".garden"))
        mp.delenv("GARDEN_TRACE_DAYS", raising=False)
        mp.delenv("GARDEN_TRACE", raising=False)
        yield root


def invoke(args, capsys):
    """The command as a user runs it: any exception but SystemExit is a traceback."""
    try:
        code = main(args)
    except SystemExit as exc:  # argparse refusing a usage
        code = exc.code
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (args, code, err[:500])
    assert "Traceback" not in err
    assert len(out.encode()) + len(err.encode()) <= MAX_OUTPUT, (args, len(out), len(err))
    assert all(len(line) <= MAX_ERROR_LINE for line in err.splitlines()), max(err.splitlines(), key=len)[:200]
    return code, out, err


def trace_size(root: Path) -> int:
    folder = root / ".garden" / "traces"
    return sum(p.stat().st_size for p in folder.glob("*.jsonl")) if folder.is_dir() else 0


def strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


# --- generators ---------------------------------------------------------------------

HOSTILE_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
WORDY = st.text(alphabet=string.ascii_letters + " -_.'é雪山\u202e", max_size=30)
JUNK = st.one_of(HOSTILE_TEXT, st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                 st.booleans(), st.none(), st.lists(WORDY, max_size=3), st.dictionaries(WORDY, WORDY, max_size=2))
DATES = st.one_of(st.dates().map(str), st.sampled_from(["2030-02-30", "2030-13-01", "0000-01-01", "yesterday"]),
                  st.integers(-5, 10**9), st.none())
IDS = st.one_of(st.sampled_from(["a", "b", "c", "n.1", "s.1"]), st.from_regex(r"[a-z0-9_.-]{1,12}", fullmatch=True),
                HOSTILE_TEXT)
RECORD_FIELDS = {
    "kind": st.one_of(st.sampled_from(["source", "chunk", "state", "decision", "note", "view", "control"]), JUNK),
    "text": st.one_of(WORDY, HOSTILE_TEXT, JUNK),
    "title": st.one_of(WORDY, JUNK),
    "at": DATES, "observed_at": DATES, "valid_from": DATES, "valid_to": DATES,
    "last_confirmed_at": DATES, "decided_at": DATES, "expected_resolution_at": DATES,
    "topics": st.one_of(st.lists(st.sampled_from(["t1", "t2", "alias one", "typo"]), max_size=3), JUNK),
    "entities": st.one_of(st.lists(st.sampled_from(["e1", "e2", "nobody"]), max_size=2), JUNK),
    "sources": st.one_of(st.lists(IDS, max_size=2), JUNK),
    "related": st.lists(IDS, max_size=2),
    "status": st.one_of(st.sampled_from(["active", "superseded"]), JUNK),
    "superseded_by": st.one_of(IDS, st.none()),
    "fidelity": st.one_of(st.sampled_from(["transcript", "summary", "projection"]), JUNK),
    "private": st.one_of(st.booleans(), JUNK),
    "stability": st.one_of(st.sampled_from(["temporary", "stable"]), JUNK),
    "mystery_field": JUNK,
}


@st.composite
def records(draw):
    fields = draw(st.lists(st.sampled_from(sorted(RECORD_FIELDS)), max_size=6, unique=True))
    record = {"id": draw(IDS), "kind": "note", "text": "a plain note about the stove"}
    for name in fields:
        record[name] = draw(RECORD_FIELDS[name])
    return record


@st.composite
def story_texts(draw):
    """A story written as YAML from generated data, or the shipped story's text with a
    hostile fragment spliced in."""
    if draw(st.booleans()):
        story = {"story": "gen", "project": draw(st.one_of(st.just("p"), JUNK)),
                 "topics": draw(st.one_of(st.just({"t1": {"aliases": ["alias one"]}, "t2": {"related": ["t1"]}}),
                                          st.dictionaries(WORDY, JUNK, max_size=3))),
                 "entities": {"e1": {"aliases": ["eve"], "project": "p"}, "e2": None},
                 "records": draw(st.lists(records(), max_size=6))}
        if draw(st.booleans()):
            story[draw(WORDY)] = draw(JUNK)
        return yaml.safe_dump(story, allow_unicode=draw(st.booleans()), sort_keys=False)
    text = (ROOT / "fixtures" / "aurora-ridge.yaml").read_text(encoding="utf-8").replace(
        "story: aurora-ridge", "story: gen", 1)
    fragment = draw(st.one_of(
        st.sampled_from(["&a [x, x]", "*a", "!!float hi", "!!timestamp 2030-02-30", "!!python/object:os.system",
                         "[" * 300, "{" * 300, "? ", ": :", "\t", "- ", "%YAML 1.1\n---\n", "...\n", "\u202e",
                         "\ufeff", "<<: *a\n", "&a\n", "\"\\x00\"", "'", '"']),
        HOSTILE_TEXT))
    at = draw(st.integers(0, len(text)))
    cut = draw(st.integers(0, 40))
    return text[:at] + fragment + text[at + cut:]


@st.composite
def case_data(draw):
    expect_keys = ["decision", "lead", "include", "exclude", "sequence", "before", "labels", "absent_labels",
                   "rejected", "max_items", "warnings", "fidelity", "bogus"]
    ids = st.one_of(st.sampled_from(STORY_IDS), IDS)
    values = {
        "decision": st.one_of(st.sampled_from(["retrieve", "ask", "skip"]), JUNK),
        "lead": ids, "include": st.lists(ids, max_size=3), "exclude": st.lists(ids, max_size=3),
        "sequence": st.lists(ids, max_size=3), "before": st.lists(st.tuples(ids, ids), max_size=2),
        "labels": st.dictionaries(ids, st.lists(st.one_of(st.sampled_from(LABELS), WORDY), max_size=2), max_size=2),
        "absent_labels": st.dictionaries(ids, st.lists(st.sampled_from(LABELS), max_size=2), max_size=2),
        "rejected": st.dictionaries(ids, st.one_of(st.sampled_from(REASONS), WORDY), max_size=2),
        "max_items": st.one_of(st.integers(-3, 30), JUNK), "warnings": st.lists(WORDY, max_size=2),
        "fidelity": st.dictionaries(ids, st.sampled_from(["summary", "transcript", "bad"]), max_size=1),
        "bogus": JUNK,
    }
    expect = {k: draw(values[k]) for k in draw(st.lists(st.sampled_from(expect_keys), max_size=4, unique=True))}
    settings_ = draw(st.dictionaries(
        st.sampled_from(["standout", "lane_cap", "candidates", "phrase_ceiling", "phrase_weight", "min_share",
                         "semantic_floor", "related_decay", "view_fraction", "nonsense"]),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 100), WORDY), max_size=3))
    story = draw(st.one_of(st.just("aurora-ridge"), WORDY, st.just("../fixtures/aurora-ridge.yaml")))
    case = {"id": "gen", "story": story,
            "as_of": draw(st.one_of(st.just("2030-01-06"), DATES)),
            "query": draw(st.one_of(st.sampled_from(["Why have I not felt like gaming recently?",
                                                     "remember our glacier custard incident?", "the captain"]),
                                    HOSTILE_TEXT, WORDY)),
            "budget": draw(st.one_of(st.just(1200), st.integers(-10, 5000), JUNK)),
            "settings": settings_, "expect": expect,
            "hints": draw(st.one_of(st.just({}), st.fixed_dictionaries({"topics": st.lists(WORDY, max_size=2)}))),
            "session": draw(st.lists(st.one_of(WORDY, HOSTILE_TEXT), max_size=2)),
            "controls": draw(st.lists(st.fixed_dictionaries(
                {"name": WORDY, "query": st.one_of(WORDY, HOSTILE_TEXT)},
                optional={"expect": st.fixed_dictionaries({}, optional={"exclude": st.lists(ids, max_size=2)})}),
                max_size=2))}
    for key in draw(st.lists(st.sampled_from(sorted(case)), max_size=1)):
        if key != "id":
            del case[key]
    return case


QUERY_TEXT = st.one_of(
    HOSTILE_TEXT,
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=200, max_size=2000),
    st.lists(st.sampled_from(["glacier", "custard", "incident", "the", "of", "captain", "observatory", "mira",
                              "games", "冰川", "蛋奶", "事故", "control.import.0107", "state.mira.gaming", "-", "'s",
                              "\u202e", "\u200b", "\t"]), max_size=40).map(" ".join),
)

OPTION_KEYS = ["k1", "b", "variant", "idf", "method", "analyzer", "ngram_range", "sublinear_tf", "stopwords",
               "stem", "k", "depth", "retrievers", "batch_size", "nonsense", "", "K1"]
OPTION_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-0", "0", "1", "1.5", "-5", "7", "abc", "true", "false",
                     "okapi", "plus", "l", "lucene", "char", "word", "bm25", "bm25s,tfidf", "", "2,3", "²", "١٢"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str), st.integers(-10**6, 10**6).map(str), WORDY)


@st.composite
def pipeline_specs(draw):
    name = draw(st.one_of(st.sampled_from(["bm25", "bm25s", "tfidf", "hybrid", "default", "dense"]), WORDY))
    pairs = draw(st.lists(st.tuples(st.one_of(st.sampled_from(OPTION_KEYS), WORDY), OPTION_VALUES), max_size=3))
    spec = name + "".join(f":{k}={v}" for k, v in pairs)
    if draw(st.integers(0, 9)) == 0:
        spec += draw(st.sampled_from([":", "::", ":=", ":k1", "="]))
    return spec


# --- the properties -------------------------------------------------------------------


@profile("story")
@given(text=story_texts())
def test_any_story_file_is_checked_without_a_traceback(workdir, capsys, text):
    RAN["story"] += 1
    path = workdir / "fixtures" / "gen.yaml"
    index = workdir / ".garden" / "index" / "gen.json"
    index.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8")
    code, out, err = invoke(["check", "gen"], capsys)
    if code == 0:
        assert index.is_file() and "all valid" in out
    else:
        assert not index.exists(), "a refused story writes no index"
        assert "errors found" in out or err


@profile("case")
@given(case=case_data())
def test_any_case_file_runs_or_is_refused_cleanly(workdir, capsys, case):
    RAN["case"] += 1
    path = workdir / "regression" / "gen.yaml"
    path.write_text(yaml.safe_dump(case, allow_unicode=True, sort_keys=False), encoding="utf-8")
    before = trace_size(workdir)
    code, out, err = invoke(["run", str(path), "--pipeline", "bm25s", "--json"], capsys)
    if code == 2:
        assert out == "" and err.strip()
        assert trace_size(workdir) == before, "a refused case writes no trace"
    else:
        report = strict_json(out)
        assert report["failed"] == (1 if code == 1 else 0)


@profile("query")
@given(text=QUERY_TEXT, pipeline=st.sampled_from(["bm25", "bm25s", "tfidf", "bm25:variant=plus", "default"]),
       budget=st.integers(1, 3000))
def test_any_query_string_gets_a_packet_or_one_refusal(workdir, capsys, text, pipeline, budget):
    RAN["query"] += 1
    before = trace_size(workdir)
    # "--" ends the options, so a query that opens with "-" is still the query's text
    code, out, err = invoke(["query", f"--pipeline={pipeline}", f"--budget={budget}", "--as-of=2030-01-12",
                             "--json", "--", "aurora-ridge", text], capsys)
    assert code in (0, 2)
    if code == 2:
        assert out == "" and len(err.strip().splitlines()) == 1
        assert trace_size(workdir) == before
        return
    packet = strict_json(out)
    assert packet["budget"]["used"] <= packet["budget"]["limit"] == budget
    assert {item["id"] for item in packet["items"]} <= set(STORY_IDS)
    assert not any(item["id"].startswith("control.") for item in packet["items"])
    assert trace_size(workdir) > before


@profile("options")
@given(spec=pipeline_specs())
def test_any_pipeline_option_is_used_or_refused_in_one_line(workdir, capsys, spec):
    RAN["options"] += 1
    before = trace_size(workdir)
    # `--pipeline=SPEC` in one word: a spec that opens with "-" is still the option's value
    code, out, err = invoke(["query", "aurora-ridge", "glacier custard incident", f"--pipeline={spec}",
                             "--as-of", "2030-01-12", "--json"], capsys)
    assert code in (0, 2)
    if code == 2:
        lines = err.strip().splitlines()
        # one line per problem: at most one per option, one for the name, one for the syntax
        assert out == "" and 1 <= len(lines) <= spec.count(":") + 2, err
        assert all(line.startswith("garden: ") for line in lines), err
        assert trace_size(workdir) == before
    else:
        packet = strict_json(out)
        assert all(isinstance(item["score"], float) for item in packet["items"])


def test_the_run_generated_enough():
    """Only meaningful when every property above ran in this session (not under -k)."""
    if not all(RAN.values()):
        pytest.skip("the property tests did not all run in this session")
    assert sum(RAN.values()) >= 2000, RAN
