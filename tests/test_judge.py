"""Adjudication (`garden judge`), capture (`garden capture`) and compare --judgments: the
loop from a trace to a promoted regression case, on a scratch copy of Aurora Ridge."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from garden.cli import main
from garden.errors import GardenError
from garden.evaluation.judgments import Judgments, questions_path, read_qrels

BATTERY = "How do we keep spare batteries warm?"   # answered only by a note written in Chinese
SLEEP = "Who sleeps in the afternoon?"              # default answers it


def trace_of(project: Path) -> Path:
    [trace] = sorted((project / ".garden" / "traces").glob("trace-*.jsonl"))
    return trace


@pytest.fixture
def traced(project, capsys):
    """Three events, two distinct questions: the battery question twice (two pipelines)."""
    for args in ([BATTERY], [SLEEP], [BATTERY, "--pipeline", "bm25s"]):
        assert main(["query", "aurora-ridge", *args]) == 0
    capsys.readouterr()
    return trace_of(project)


def judge(project, trace, answers: str, *extra) -> int:
    path = project / "answers.txt"
    path.write_text(answers, encoding="utf-8")
    return main(["judge", str(trace), "--answers", str(path), "--pipelines", "default,bm25s", *extra])


# Question 1 (battery): pooled default #1 chat.1201; bm25s pref.mira.milk, chat.1201, chat.0103.
# Answers: verdict, then the pool best position first (chat.1201, pref.mira.milk, chat.0103),
# then the records no pipeline served.
BATTERY_ANSWERS = "a\nn\nn\nn\nnote.battery=l\n"


def test_scripted_judging_writes_qrels_and_verdicts_and_resumes(project, traced, capsys):
    assert judge(project, traced, "a\nn\nn\n.\nnote.battery=l\n") == 0
    out = capsys.readouterr().out
    assert "question 1 (q-" in out and "1 of 2 to judge" in out and "stopped (the answers ran out)" in out
    assert "4 verdicts saved this run" in out  # the verdict, two grades and the missed record
    qrels = project / "judgments" / f"{traced.stem}.qrels"
    grades = read_qrels(qrels)
    [qid] = grades
    # the skipped item stays unjudged; the missed record is graded as the answer
    assert grades[qid] == {"chat.1201": 0, "pref.mira.milk": 0, "note.battery": 2}
    verdicts = [json.loads(line) for line in questions_path(qrels).read_text().splitlines()]
    assert verdicts == [{"qid": qid, "verdict": "answer", "missed_asked": True, "story": "aurora-ridge",
                         "query": BATTERY, "as_of": "2030-01-12", "case": None}]
    # a second run asks only what is unjudged: the skipped item, then the second question
    assert judge(project, traced, "r\na\nl\nn\n\n") == 0
    out = capsys.readouterr().out
    assert "chat.1201" not in out and "chat.0103" in out and "2 of 2 questions fully judged" in out
    grades = read_qrels(qrels)
    assert grades[qid]["chat.0103"] == 1 and grades[qid]["note.battery"] == 2
    # everything judged: a third run asks nothing and changes nothing
    before = qrels.read_bytes()
    assert judge(project, traced, "") == 0
    assert "0 verdicts saved this run; 2 of 2" in capsys.readouterr().out
    assert qrels.read_bytes() == before


def test_a_quit_mid_question_counts_what_it_saved(project, traced, capsys):
    assert judge(project, traced, "a\nq\n") == 0
    out = capsys.readouterr().out
    assert "stopped (quit): 1 verdict saved this run; 0 of 2 questions fully judged" in out


def test_a_bad_answer_is_located_and_loses_nothing_saved(project, traced, capsys):
    assert judge(project, traced, "a\nn\nmaybe\n") == 2
    err = capsys.readouterr().err
    assert "answers.txt:3" in err and "'maybe' is not one of" in err
    store = Judgments.load(project / "judgments" / f"{traced.stem}.qrels")
    [qid] = store.qrels
    assert store.qrels[qid] == {"chat.1201": 0} and store.verdict(qid) == "answer"
    # an unknown record among the missed ones is refused the same way
    assert judge(project, traced, "n\nn\nno.such.record\n") == 2
    assert "no.such.record" in capsys.readouterr().err
    assert Judgments.load(store.path).qrels[qid] == {"chat.1201": 0, "pref.mira.milk": 0, "chat.0103": 0}


def test_a_damaged_judgments_file_is_refused_not_overwritten(project, traced, capsys):
    qrels = project / "judgments" / f"{traced.stem}.qrels"
    qrels.parent.mkdir()
    qrels.write_text("q-1 0 chat.1201 1\nq-1 0 chat.1201 maybe\n")
    assert judge(project, traced, BATTERY_ANSWERS) == 2
    assert f"{traced.stem}.qrels:2: field grade: 'maybe'" in capsys.readouterr().err
    assert qrels.read_text() == "q-1 0 chat.1201 1\nq-1 0 chat.1201 maybe\n"
    qrels.write_text("q-1 0 chat.1201 1\nq-1 0 chat.1201 0\n")
    with pytest.raises(GardenError, match=":2: q-1 chat.1201 is graded twice"):
        Judgments.load(qrels)
    questions_path(qrels).write_text('{"qid": "q-1", "verdict": "perhaps"}\n')
    qrels.write_text("")
    with pytest.raises(GardenError, match=r"questions.jsonl:1: field verdict: 'perhaps'"):
        Judgments.load(qrels)


def test_compare_scores_a_free_query_by_the_persons_grades_not_its_packet(project, traced, capsys):
    assert judge(project, traced, BATTERY_ANSWERS + "a\nl\nn\n\n") == 0
    capsys.readouterr()
    qrels = project / "judgments" / f"{traced.stem}.qrels"
    assert main(["compare", str(traced), "--pipelines", "bm25s,default", "--judgments", str(qrels),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trace"]["adjudicated"] == 2 and data["trace"]["free_unjudged"] == 0
    assert data["judgments"]["graded"].startswith("2 questions judged by a person's grades in")
    # default served chat.1201 first for the battery question; the person's answer is
    # note.battery, which no pipeline served, so no pipeline scores a perfect AP there
    per_query = {row["query"]: row for row in data["per_query"]}
    battery = per_query[f"query: {BATTERY}"]
    assert battery["AP"] == {"bm25s": 0.0, "default": 0.0}
    assert per_query[f"query: {SLEEP}"]["AP"]["default"] == 1.0
    assert data["question_verdicts"]["default"] == {"matched": 2, "questions": 2}
    # as a person reads it: every question graded, so the agreement table says nothing of "no judgments"
    assert main(["compare", str(traced), "--pipelines", "bm25s,default", "--judgments", str(qrels)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "agreement with bm25s over 2 questions" in shown and "no judgments" not in shown
    # without the judgments the same free queries get no graded figure at all
    assert main(["compare", str(traced), "--pipelines", "bm25s,default", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["queries"] == 0 and data["judgments"]["graded"].startswith("none")
    assert main(["compare", str(traced), "--pipelines", "bm25s,default"]) == 0
    assert "agreement with bm25s over 2 questions (no judgments)" in " ".join(capsys.readouterr().out.split())
    # judgments apply to a trace only
    assert main(["compare", "regression/named-phrase.yaml", "--pipelines", "bm25s", "--judgments",
                 str(qrels)]) == 2


def test_capture_refuses_a_question_default_already_passes(project, traced, capsys):
    assert judge(project, traced, BATTERY_ANSWERS + "a\nl\nn\n\n") == 0
    capsys.readouterr()
    assert main(["capture", str(traced), "--query", SLEEP]) == 1
    assert "not a miss; nothing written" in capsys.readouterr().err
    assert not list((project / "challenge").glob("who-sleeps*"))
    assert main(["capture", str(traced), "--query", "2", "--name", "afternoon-sleep", "--force"]) == 0
    case = yaml.safe_load((project / "challenge" / "afternoon-sleep.yaml").read_text())
    assert case["expect"] == {"decision": "retrieve", "lead": "state.jonas.sleep"}
    # bad input: a number out of range, an unknown text, an existing name, a question
    # without a verdict
    assert main(["capture", str(traced), "--query", "3"]) == 2
    assert "no question 3 among the 2 distinct questions" in capsys.readouterr().err
    assert main(["capture", str(traced), "--query", "Where is the moon?"]) == 2
    assert main(["capture", str(traced), "--query", "2", "--name", "afternoon-sleep", "--force"]) == 2
    assert "exists" in capsys.readouterr().err


def test_capture_without_a_verdict_is_refused(project, traced, capsys):
    assert judge(project, traced, ".\nn\nn\nn\n\n") == 0  # grades, no question verdict
    capsys.readouterr()
    assert main(["capture", str(traced), "--query", "1"]) == 2
    assert "has no question verdict yet" in capsys.readouterr().err


def test_the_loop_trace_judge_capture_fix_promote(project, traced, capsys):
    """The issue's loop end to end: the captured case fails under default, passes once its
    cause (a note only written in Chinese, which an English question cannot reach) is fixed
    in the story, and then promotes."""
    assert judge(project, traced, BATTERY_ANSWERS + "a\nl\nn\n\n") == 0
    assert main(["capture", str(traced), "--query", "1", "--name", "battery-care"]) == 0
    out = capsys.readouterr().out
    assert "default misses it" in out and "lead: expected note.battery, got chat.1201" in out
    case_path = project / "challenge" / "battery-care.yaml"
    case = yaml.safe_load(case_path.read_text())
    assert case["story"] == "aurora-ridge" and case["query"] == BATTERY and str(case["as_of"]) == "2030-01-12"
    assert case["expect"] == {"decision": "retrieve", "lead": "note.battery"}
    assert case["origin"].startswith(f"garden capture: {traced.name} line 1 (a free query, traced ")
    assert main(["run", str(case_path)]) == 0  # a challenge case never fails the run
    assert "known miss" in capsys.readouterr().out
    assert main(["promote", str(case_path), "--runs", "1"]) == 1  # not yet
    capsys.readouterr()
    # the fix: the note gains an English title
    story = project / "fixtures" / "aurora-ridge.yaml"
    text = story.read_text(encoding="utf-8")
    anchor = "  - id: note.battery\n    kind: note\n"
    assert anchor in text
    story.write_text(text.replace(anchor, anchor + '    title: "Battery care: spare batteries kept warm '
                                  'in an inner pocket"\n'), encoding="utf-8")
    # a negative control before promoting: a battery question about something else keeps
    # its own answer first and does not pull the newly titled note
    with case_path.open("a", encoding="utf-8") as f:
        f.write("controls:\n  - name: another battery question keeps its answer\n"
                "    query: What did Jonas say about battery at thirty below?\n"
                "    expect: {lead: chat.1201, exclude: [note.battery]}\n")
    assert main(["run", str(case_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] == 1 and result["results"][0]["controls"][0]["passed"]
    assert main(["promote", str(case_path), "--runs", "2"]) == 0
    assert (project / "regression" / "battery-care.yaml").is_file() and not case_path.exists()


def test_a_terminal_is_asked_again_after_a_bad_answer():
    from garden.evaluation.judge import VERDICT_KEYS, Answers, Stopped, parse_choice

    shown: list[str] = []
    answers = Answers(["maybe", "k", "q"], "<stdin>", True, shown.append)
    assert answers.ask("verdict?", parse_choice(VERDICT_KEYS)) == "ask"
    assert any("'maybe' is not one of" in line and "try again" in line for line in shown)
    with pytest.raises(Stopped, match="quit"):
        answers.ask("verdict?", parse_choice(VERDICT_KEYS))


def test_a_folder_of_traces_is_read_by_day_window(project, capsys):
    """Days come from the files' names; questions fold across days as within one."""
    folder = project / ".garden" / "traces"
    for day, query in (("2031-03-01", BATTERY), ("2031-03-02", SLEEP), ("2031-03-03", BATTERY)):
        assert main(["query", "aurora-ridge", query, "--pipeline", "bm25s"]) == 0
        [today] = [f for f in folder.glob("trace-*.jsonl") if not f.name.startswith("trace-2031")]
        today.rename(folder / f"trace-{day}.jsonl")
    capsys.readouterr()

    def compared(*window):
        assert main(["compare", str(folder), "--pipelines", "bm25s", "--json", *window]) == 0
        return json.loads(capsys.readouterr().out)["trace"]

    assert (compared()["distinct"], compared()["folded"]) == (2, 1)
    assert (compared("--since", "2031-03-02")["distinct"], compared("--since", "2031-03-02")["folded"]) == (2, 0)
    assert compared("--until", "2031-03-01")["events"] == 1
    assert main(["compare", str(folder), "--pipelines", "bm25s", "--since", "2031-03-03", "--until",
                 "2031-03-01"]) == 2
    assert "is after --until" in capsys.readouterr().err
    assert main(["compare", str(folder / "trace-2031-03-01.jsonl"), "--pipelines", "bm25s", "--since",
                 "2031-03-01"]) == 2
    assert "a trace file is one day" in capsys.readouterr().err
    assert main(["compare", str(folder), "--pipelines", "bm25s", "--since", "2032-01-01"]) == 2
    assert "no trace file between" in capsys.readouterr().err
    # the judge walks the same window, and names each question's file
    answers = project / "answers.txt"
    answers.write_text("a\n")
    assert main(["judge", str(folder), "--since", "2031-03-02", "--answers", str(answers)]) == 0
    assert "trace-2031-03-02.jsonl line 1" in capsys.readouterr().out


def test_one_question_has_one_number_in_judge_capture_compare_and_the_explorer(project, capsys):
    """Numbers count every distinct question of the trace, whatever --source keeps: the
    question `judge --source query` calls 3 is the one `capture --query 3`, `compare` and
    `explore --trace --query 3` take."""
    assert main(["run", "regression/similar-wording.yaml"]) == 0
    for query in (BATTERY, SLEEP):
        assert main(["query", "aurora-ridge", query]) == 0
    capsys.readouterr()
    folder = project / ".garden" / "traces"
    assert main(["compare", str(folder), "--pipelines", "bm25s", "--json"]) == 0
    every = {row["question"]: row for row in json.loads(capsys.readouterr().out)["per_query"]}
    battery = next(n for n, row in every.items() if row["query"] == f"query: {BATTERY}")
    assert battery == len(every) - 1 and every[battery]["qid"].startswith("q-")
    assert main(["compare", str(folder), "--pipelines", "bm25s", "--source", "query", "--json"]) == 0
    free = {row["question"]: row["qid"] for row in json.loads(capsys.readouterr().out)["per_query"]}
    assert free == {battery: every[battery]["qid"], battery + 1: every[battery + 1]["qid"]}
    answers = project / "answers.txt"
    answers.write_text(BATTERY_ANSWERS + "a\nl\nn\n\n", encoding="utf-8")
    assert main(["judge", str(folder), "--source", "query", "--pipelines", "default,bm25s",
                 "--answers", str(answers)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"question {battery} ({every[battery]['qid']}), 1 of 2 to judge")
    assert f"question {battery + 1} ({every[battery + 1]['qid']}), 2 of 2 to judge" in out
    assert main(["capture", str(folder), "--query", str(battery), "--name", "by-number"]) == 0
    assert main(["capture", str(folder), "--source", "query", "--query", every[battery]["qid"],
                 "--name", "by-qid"]) == 0
    for name in ("by-number", "by-qid"):
        assert yaml.safe_load((project / "challenge" / f"{name}.yaml").read_text())["query"] == BATTERY
    assert main(["capture", str(folder), "--source", "query", "--query", "1", "--name", "gone"]) == 2
    assert "no question 1 among the 2 distinct questions the source kept" in capsys.readouterr().err
    page = project / "sleep.html"
    assert main(["explore", "--trace", str(folder), "--query", str(battery + 1), "--out", str(page)]) == 0
    assert SLEEP in page.read_text(encoding="utf-8")


def test_compare_counts_the_same_graded_questions_in_its_header_table_and_footer(project, capsys):
    """A question that only forbids items is judged, but not graded: it counts in the
    forbidden hits, and every count of graded questions agrees."""
    (project / "challenge" / "only-forbids.yaml").write_text(
        "id: only-forbids\nstory: aurora-ridge\nas_of: 2030-01-07\nquery: Why have I not felt like gaming recently?\n"
        "expect: {exclude: [pref.mira.milk]}\n", encoding="utf-8")
    assert main(["run", "regression/similar-wording.yaml", "challenge/only-forbids.yaml"]) == 0
    capsys.readouterr()
    assert main(["compare", str(trace_of(project)), "--pipelines", "bm25,default", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    graded = data["queries"]
    assert data["trace"]["judged"] == graded and data["trace"]["forbidden_only"] == 1
    assert data["judgments"]["graded"].startswith(f"{graded} questions judged by")
    assert main(["compare", str(trace_of(project)), "--pipelines", "bm25,default"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{graded} graded by each case's expectations; 1 judged only by what they forbid" in out
    assert f"{graded} graded questions, baseline bm25" in out
    assert f"{graded} graded questions, 2 pipelines" in out
