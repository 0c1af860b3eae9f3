"""A LongMemEval run beside the published figures (garden/evaluation/published.py): the
rows on figures made by hand, the printed table within 80 columns, and the refusals. The
table on a real run is checked on the development subset (tests/test_longmemeval_dev.py)."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from garden.errors import GardenError
from garden.evaluation.published import MEASURES, PUBLISHED, SCORINGS, beside_published, published_table
from garden.evaluation.kinds.registry import compare_source

RUN = {"bm25s": {"recall_all@5": 0.5, "recall_any@5": 0.75, "ndcg_any@10": 0.625, "ndcg_any@5": 0.1},
       "default": {"recall_all@5": 0.875, "recall_any@5": 1.0, "ndcg_any@10": 0.9}}


def test_the_runs_rows_come_first_with_their_questions_and_scoring():
    rows = beside_published(RUN, 8, "sample.json")
    assert [r["system"] for r in rows[:2]] == ["bm25s", "default"]
    assert rows[0]["questions"] == "8 here" and "8 judged questions of sample.json" in rows[0]["setup"]
    assert rows[0]["scoring"] == "authors'" and rows[0]["source"] == "this run"
    # only the three session measures the published systems report
    assert rows[0]["figures"] == {"recall_all@5": 0.5, "recall_any@5": 0.75, "ndcg_any@10": 0.625}
    assert len(rows) == 2 + len(PUBLISHED)


def test_every_published_row_says_its_questions_scoring_and_source_and_reports_a_known_measure():
    for p in PUBLISHED:
        assert p.questions and p.setup and p.source and p.scoring in SCORINGS
        assert p.figures and set(p.figures) <= set(MEASURES)
        assert all(0 < v <= 1 for v in p.figures.values())


def test_a_run_with_no_judged_question_is_refused():
    with pytest.raises(ValueError, match="at least one judged question"):
        beside_published(RUN, 0, "sample.json")


def test_the_table_shows_a_dash_where_nothing_was_published_and_fits_80_columns():
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(published_table(beside_published(RUN, 8, "sample.json")))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "0.875" in text and "0.955" in text and "-" in text


def test_against_is_refused_on_a_source_that_is_not_longmemeval():
    with pytest.raises(GardenError, match="`against` sets the published figures beside a LongMemEval comparison; "
                                          "the cases kind does not take it"):
        compare_source("regression", ["bm25"], against="published")
