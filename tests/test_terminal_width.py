"""What the command line prints for a person reads at 80 columns and wider: no line wider
than the terminal (counted in terminal cells, a CJK character two), and no word broken
across lines: every id, case, pipeline, label and reason the command's --json names
appears whole on one line of its table. Run in process on a scratch copy of the shipped
stories, at COLUMNS=80 and COLUMNS=120."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from garden._terminal import cells, wrap
from garden.cli import main

WIDTHS = (80, 120)
GAMING = "Why have I not felt like gaming recently?"


def shown(capsys, monkeypatch, columns: int, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(list(args))
    return code, capsys.readouterr().out


def as_json(capsys, monkeypatch, *args: str) -> dict:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_fits(text: str, columns: int, words) -> None:
    lines = text.splitlines()
    assert lines, "nothing printed"
    too_wide = [line for line in lines if cell_len(line) > columns]
    assert not too_wide, f"wider than {columns}: {too_wide[:3]}"
    for word in words:
        assert any(re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", line) for line in lines), \
            f"{word!r} is not whole on any line:\n{text}"


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_contrast_matrix_is_a_mark_per_case_and_pipeline(project, capsys, monkeypatch, columns):
    paths = ["regression/similar-wording.yaml", "regression/named-phrase.yaml", "challenge"]
    data = as_json(capsys, monkeypatch, "contrast", *paths)
    code, out = shown(capsys, monkeypatch, columns, "contrast", *paths)
    assert code == 0
    assert_fits(out, columns, [row["case"] for row in data["cases"]] + data["pipelines"])
    for row in data["cases"]:
        [line] = [line for line in out.splitlines() if line.startswith(f"  {row['case']} ")]
        marks = line.split()[1:]
        assert marks[-1] == ("yes" if row["contrast"] else "no")
        assert (marks[-2] == "✓") == row["pipelines"]["default"]["passed"], line
    # the reasons, on request, each failing cell's failures on lines of their own
    code, out = shown(capsys, monkeypatch, columns, "contrast", *paths, "--reasons")
    assert_fits(out, columns, ["similar-wording", "bm25"])
    assert "similar-wording under bm25:" in out


@pytest.mark.parametrize("columns", WIDTHS)
def test_the_packet_shows_text_lane_labels_and_why(project, capsys, monkeypatch, columns):
    packet = as_json(capsys, monkeypatch, "query", "aurora-ridge", GAMING, "--as-of", "2030-01-06")
    code, out = shown(capsys, monkeypatch, columns, "query", "aurora-ridge", GAMING, "--as-of", "2030-01-06")
    assert code == 0
    words = [item["id"] for item in packet["items"]] + [r["id"] for r in packet["rejected"]]
    words += [label for item in packet["items"] for label in item["labels"]]
    words += [r["reason"] for r in packet["rejected"]]
    assert_fits(out, columns, words)
    lines = out.splitlines()
    first = packet["items"][0]
    assert first["id"] == "state.mira.gaming"
    state = lines.index(f" 1. state.mira.gaming  score {first['score']:.3f}")   # the score --json gives
    chat = next(n for n, line in enumerate(lines) if line.startswith(" 2. chat.0102  score "))
    # the lane each rode in, on the line below its id: curated packs first, then evidence
    assert lines[state + 1].split()[0] == "curated" and lines[chat + 1].split()[0] == "evidence"
    assert "Lately I have not felt like playing games." in out  # the text itself, not only its id
    assert "curated lane (states and decisions) first" in " ".join(out.split())


@pytest.mark.parametrize("query, why", [
    ("What is the capital of France?", "silent: no record matched the query closely enough"),
    ("我们的营地日志里写过无人机吗？", "silent: nothing stood out as an answer: support"),
])
def test_a_silent_query_says_it_stayed_silent_and_why(project, capsys, monkeypatch, query, why):
    code, out = shown(capsys, monkeypatch, 80, "query", "aurora-ridge", query, "--as-of", "2030-01-12")
    assert code == 0 and why in " ".join(out.split())
    assert_fits(out, 80, [])


def test_stored_text_is_shown_with_its_controls_made_visible(project, capsys, monkeypatch):
    story = project / "fixtures" / "aurora-ridge.yaml"
    text = story.read_text(encoding="utf-8")
    anchor = "text: Lately I have not felt like playing games."
    assert anchor in text
    story.write_text(text.replace(anchor, 'text: "Lately I have not felt like \\e[31mplaying\\u202e games."'),
                     encoding="utf-8")
    code, out = shown(capsys, monkeypatch, 80, "query", "aurora-ridge", GAMING, "--as-of", "2030-01-06",
                      "--pipeline", "bm25")
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mplaying\\u202e games." in out


def test_a_long_text_is_shortened_to_the_terminal(project, capsys, monkeypatch):
    code, out = shown(capsys, monkeypatch, 80, "query", "kiln-lane", "what did you suggest for the glaze?",
                      "--pipeline", "bm25")
    assert code == 0 and "…" in out
    assert_fits(out, 80, [])


@pytest.mark.parametrize("columns", WIDTHS)
def test_a_run_of_cases_lists_each_case_and_its_failures(project, capsys, monkeypatch, columns):
    data = as_json(capsys, monkeypatch, "run", "challenge", "regression/budget.yaml")
    code, out = shown(capsys, monkeypatch, columns, "run", "challenge", "regression/budget.yaml")
    assert code == 0
    assert_fits(out, columns, [r["case"] for r in data["results"]])
    misses = sum(1 for r in data["results"] if r["suite"] == "challenge" and not r["passed"])
    assert misses >= 2
    assert f"challenge ledger: {misses} known misses, reported" in " ".join(out.split())
    assert "miss(es)" not in out


@pytest.mark.parametrize("columns", WIDTHS)
def test_compare_and_ablate_tables_fit(project, capsys, monkeypatch, columns):
    data = as_json(capsys, monkeypatch, "compare", "regression/similar-wording.yaml", "--pipelines",
                   "bm25,tfidf,default", "--baseline", "bm25")
    code, out = shown(capsys, monkeypatch, columns, "compare", "regression/similar-wording.yaml", "--pipelines",
                      "bm25,tfidf,default", "--baseline", "bm25")
    assert code == 0
    assert_fits(out, columns, [*data["pipelines"], *data["measures"]])
    code, out = shown(capsys, monkeypatch, columns, "ablate", "regression/similar-wording.yaml",
                      "--stages", "structure,phrase")
    assert code == 0
    assert_fits(out, columns, ["structure", "phrase", "similar-wording"])


def test_a_table_too_wide_for_the_terminal_is_shown_a_row_a_line(project, capsys, monkeypatch):
    from rich.table import Table

    from garden._terminal import print_table

    table = Table(title="wide")
    for n in range(12):
        table.add_column(f"measure-number-{n}")
    table.add_row(*[f"value-{n}" for n in range(12)])
    monkeypatch.setenv("COLUMNS", "80")
    print_table(table)
    out = capsys.readouterr().out
    assert_fits(out, 80, [f"measure-number-{n}" for n in range(12)] + [f"value-{n}" for n in range(12)])
    assert "measure-number-0 value-0: measure-number-1 value-1" in out


def test_a_table_whose_words_fit_but_not_with_its_dividers_is_shown_a_row_a_line(capsys, monkeypatch):
    """Seven columns whose longest words and padding take 76 cells: with the box's edges and
    its divider between columns they take 84, past 80, and rich would crop the last column."""
    from rich.table import Table

    from garden._terminal import print_table

    table = Table(title="what each stage is worth by shape")
    table.add_column("stage removed: shape")
    measures = ["Success@1", "Success@5", "Success@10", "R@5", "R@10", "nDCG@10"]
    for m in measures:
        table.add_column(f"Δ{m}", justify="right")
    table.add_row("decide: gold gathering (2)", *["+0.0125"] * len(measures))
    monkeypatch.setenv("COLUMNS", "80")
    print_table(table)
    assert_fits(capsys.readouterr().out, 80, [f"Δ{m}" for m in measures] + ["+0.0125"])


@given(st.lists(st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), min_size=1,
                        max_size=30), min_size=1, max_size=40),
       st.integers(40, 120))
def test_wrapping_never_breaks_a_word_nor_passes_the_width(words, columns):
    words = [w.strip() for w in words if w.strip() and not any(ch.isspace() for ch in w.strip())]
    line = " ".join(words)
    out = wrap(line, columns)
    wide = any(cell_len(ch) == 2 for ch in line)
    if not wide:  # CJK text may break between characters, as it does; any other word stays whole
        assert " ".join(out).split() == line.split()
    for part in out:
        assert cell_len(part) <= columns or (len(part.split()) == 1 and not wide)


# --- progress: on a terminal only -----------------------------------------------------------


class Terminal:
    """Standard error as a terminal would be: it says it is one, and keeps what it is sent."""

    def __init__(self):
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def _compare_one_question(project, capsys) -> str:
    """One question asked, then its trace compared under two pipelines with --json; standard
    output must be that one JSON document. What standard error got."""
    assert main(["query", "aurora-ridge", GAMING, "--pipeline", "bm25"]) == 0
    capsys.readouterr()
    trace = next((project / ".garden" / "traces").glob("trace-*.jsonl"))
    assert main(["compare", str(trace), "--pipelines", "bm25,bm25s", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["trace"]["distinct"] == 1
    return err


@pytest.mark.parametrize("terminal", [True, False])
def test_long_work_shows_progress_on_a_terminal_and_nothing_in_a_pipe(project, capsys, monkeypatch, terminal):
    """compare, contrast and reading a trace draw a count on standard error when it is a
    terminal (here at once: the delay before drawing is set to 0), and clear it; piped,
    they write nothing there, and --json stays one clean document either way."""
    from garden._terminal import Progress

    monkeypatch.setattr(Progress, "DELAY", 0.0)
    monkeypatch.setattr(Progress, "EVERY", 0.0)
    stderr = Terminal()
    if terminal:
        monkeypatch.setattr("sys.stderr", stderr)
    err = _compare_one_question(project, capsys)
    if terminal:
        assert "\rreading the trace: 1 events" in stderr.text
        assert "\rcompare: bm25s: 1/1 questions" in stderr.text
        assert stderr.text.endswith("\r\x1b[K")  # the line cleared at the end
    else:
        assert err == "" and stderr.text == ""


def test_piped_long_work_writes_a_plain_line_now_and_then(project, capsys, monkeypatch):
    """Written to a pipe or a log (standard error no terminal), long work says it is still
    working: a whole line every PIPE_EVERY seconds once PIPE_DELAY have passed (here at once),
    never drawn over with a carriage return, and nothing of it on standard output."""
    from garden._terminal import Progress

    monkeypatch.setattr(Progress, "PIPE_DELAY", 0.0)
    monkeypatch.setattr(Progress, "PIPE_EVERY", 0.0)
    err = _compare_one_question(project, capsys)
    lines = err.splitlines()
    assert "compare: bm25s: 1/1 questions, 0 s" in lines and "\r" not in err
    assert all(cells(line) <= 80 for line in lines)


def test_a_slow_step_still_shows_time_passing(monkeypatch):
    """One long step with no count to advance (a model loading) still writes its line: the
    progress has a ticker of its own while it is entered."""
    import io
    import time

    from garden._terminal import Progress

    monkeypatch.setattr(Progress, "PIPE_DELAY", 0.0)
    monkeypatch.setattr(Progress, "PIPE_EVERY", 0.05)
    log = io.StringIO()
    with Progress("compare: default", total=3, unit="questions", stream=log) as bar:
        bar.now("loading the pipeline")
        time.sleep(0.5)
    lines = log.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("compare: default: 0/3 questions") for line in lines)
    written = log.getvalue()
    time.sleep(0.2)
    assert log.getvalue() == written   # closed: the ticker stopped


@pytest.mark.parametrize("command", [
    ["generate", "tiny-town", "--records", "200"],
    ["compare", "regression/similar-wording.yaml", "--pipelines", "bm25,bm25s,tfidf"],
])
def test_output_to_a_pipe_or_a_file_fits_80_columns(project, capsys, monkeypatch, command):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(command) == 0
    out = capsys.readouterr().out
    assert out and all(cells(line) <= 80 for line in out.splitlines()), out
