"""Adding a kind is one module and one line: the worked example of docs/extending.md,
taken from the page, written into a copy of the package beside one added line in the kind
list, and seen where a kind shows: `garden compare` on a tiny source of it (with the
shared options, `--metrics` and `--trec-dir`), the one-line refusal of an option it does
not take, `garden ablate`, and the layers' test run in the copy."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from package_copy import ROOT, add_line_after, copy_project, env_for, garden_in, worked_example

DOCS = {"d1": "the harbour lamp cracked in the storm",
        "d2": "rye loaves sold out at the market by noon",
        "d3": "the ferry crossed twice before the fog came in",
        "d4": "a new weather vane for the north tower"}
QUESTIONS = {"q1": ("what cracked in the storm", "d1"),
             "q2": ("when did the rye sell out at the market", "d2"),
             "q3": ("what happened to the north tower vane and the lamp", "d4,d1")}


@pytest.fixture(scope="module")
def garden_with_sheets(tmp_path_factory):
    """A project whose `garden` package is a copy with the `sheets` kind added, and a tiny
    source of sheets beside it."""
    root = copy_project(tmp_path_factory.mktemp("with-sheets"))
    kinds = root / "garden" / "evaluation" / "kinds"
    (kinds / "sheets.py").write_text(worked_example("## Adding a kind"), encoding="utf-8")
    add_line_after(kinds / "registry.py", '    "cases",', '    "sheets",')
    sheets = root / "tiny"
    sheets.mkdir()
    (sheets / "docs.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in DOCS.items()), encoding="utf-8")
    (sheets / "questions.tsv").write_text("".join(f"{q}\t{t}\t{r}\n" for q, (t, r) in QUESTIONS.items()),
                                          encoding="utf-8")
    return root


garden = garden_in


def test_compare_reads_the_new_kind_with_the_shared_options(garden_with_sheets):
    code, out, err = garden(garden_with_sheets, "compare", "tiny", "--pipelines", "bm25,tfidf", "--metrics",
                            "RR,nDCG@10", "--trec-dir", "runs", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["judgments"]["graded"] == "3 questions judged by the collection's qrels"
    assert report["measures"] == ["RR", "nDCG@10"]
    assert report["pipelines"]["bm25"]["RR"] == pytest.approx(1.0)   # every question's first hit is relevant
    assert {row["qid"] for row in report["per_query"]} == set(QUESTIONS)
    runs = garden_with_sheets / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["bm25.run", "qrels", "tfidf.run"]
    assert sorted((runs / "qrels").read_text().splitlines()) == ["q1 0 d1 1", "q2 0 d2 1", "q3 0 d1 1",
                                                                  "q3 0 d4 1"]


def test_an_option_it_does_not_take_is_one_line_naming_it(garden_with_sheets):
    code, _, err = garden(garden_with_sheets, "compare", "tiny", "--pipelines", "bm25", "--negatives", "foreign")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "--negatives builds unanswerable questions" in lines[0] and "the sheets kind does not take it" in lines[0]
    # its markers beside another kind's: refused naming both
    (garden_with_sheets / "tiny-too").mkdir()
    for name in ("docs.tsv", "questions.tsv"):
        shutil.copy2(garden_with_sheets / "tiny" / name, garden_with_sheets / "tiny-too" / name)
    (garden_with_sheets / "tiny-too" / "conv.json").write_text("{}", encoding="utf-8")
    code, _, err = garden(garden_with_sheets, "compare", "tiny-too", "--pipelines", "bm25")
    assert code == 2 and "sheets (questions.tsv beside docs.tsv)" in err and "locomo (.json files)" in err


def test_ablate_measures_each_stage_on_it(garden_with_sheets):
    code, out, err = garden(garden_with_sheets, "ablate", "tiny", "--stages", "decide", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["queries"] == len(QUESTIONS) and set(report["stages"]) == {"decide"}
    assert "AP" in report["stages"]["decide"]["metrics"]


def test_the_layers_hold_in_the_copy(garden_with_sheets):
    root = garden_with_sheets / "whole"
    shutil.copytree(garden_with_sheets, root, ignore=shutil.ignore_patterns("__pycache__", ".garden", "tiny*",
                                                                         "runs", "whole"))
    for name in ("tests", "docs"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, root / name)
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_layers.py", "-n", "0", "-q", "-p",
                           "no:cacheprovider"], cwd=root, env=env_for(root), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
