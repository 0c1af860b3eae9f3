"""`garden tune` (garden/evaluation/tune.py) on fictional LoCoMo conversations: each fold's
choice is the point with the best mean on the other folds (checked against a reference
written here), each held-out question is scored by its fold's choice, and a bad grid, a
source without stores or a single fold is one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from garden.cli import main
from garden.errors import GardenError
from garden.evaluation.tune import MEASURES, parse_grid, per_question, stores_of, tune, variant
from test_locomo_compare import conversation, second_conversation, write

REGRESSION = Path(__file__).resolve().parents[1] / "regression"
GRID = ["context_share=0,1", "semantic_weight=0.5,2"]


def third_conversation() -> dict:
    """A fictional beekeeper and a cooper, for a third fold."""
    return {
        "speaker_a": "Maren", "speaker_b": "Joss",
        "session_1_date_time": "7:30 am on 2 May, 2024",
        "session_1": [
            {"speaker": "Maren", "dia_id": "D1:1", "text": "Two hives swarmed into the old pear tree."},
            {"speaker": "Joss", "dia_id": "D1:2", "text": "Did you get them back into boxes?"},
            {"speaker": "Maren", "dia_id": "D1:3", "text": "Only one, the other flew over the river."},
            {"speaker": "Joss", "dia_id": "D1:4", "text": "I hooped four oak barrels for the brewery."},
        ],
        "session_2_date_time": "6:00 pm on 30 May, 2024",
        "session_2": [
            {"speaker": "Maren", "dia_id": "D2:1", "text": "The clover honey came out pale this year."},
            {"speaker": "Joss", "dia_id": "D2:2", "text": "The brewery wants two more barrels by June."},
        ],
        "qa": [
            {"question": "Where did Maren's hives swarm?", "answer": "the pear tree", "evidence": ["D1:1"],
             "category": 4},
            {"question": "How many barrels has Joss made for the brewery?", "answer": "six",
             "evidence": ["D1:4", "D2:2"], "category": 1},
            {"question": "What colour was the clover honey?", "answer": "pale", "evidence": ["D2:1"],
             "category": 4},
        ],
    }


@pytest.fixture
def stores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    monkeypatch.setenv("GARDEN_TRACE", "0")
    folder = tmp_path / "set"
    folder.mkdir()
    for n, conv in enumerate((conversation(), second_conversation(), third_conversation()), 1):
        write(folder / f"conv-{n}.json", conv)
    return folder


def test_each_fold_is_scored_by_the_point_chosen_on_the_others(stores, tmp_path):
    out = tmp_path / "tuned.json"
    report = tune(stores, "default", GRID, out=out)
    points = ["default"] + [variant("default", {"context_share": a, "semantic_weight": b})
                            for a in ("0", "1") for b in ("0.5", "2")]
    assert report.points == points
    # the reference: every point measured alone, the choice made by hand on the other folds
    _, convs = stores_of(stores)
    scores = {p: per_question(p, convs, 100) for p in points}
    folds = {q.qid: c.story.name for c in convs for q in c.questions}
    assert report.folds == {"locomo-1": 4, "locomo-2": 2, "locomo-3": 3}
    for held, point in report.chosen.items():
        train = [q for q, f in folds.items() if f != held]
        means = {p: np.mean([scores[p]["nDCG@10"][q] for q in train]) for p in points}
        best = max(means.values())
        assert means[point] == pytest.approx(best)
        # a tie is kept by the pipeline as it is, then by name
        tied = [p for p in points if means[p] == pytest.approx(best)]
        assert point == ("default" if "default" in tied else max(tied))
    for m in MEASURES:
        held_out = np.mean([scores[report.chosen[folds[q]]][m][q] for q in sorted(folds)])
        assert report.held_out["every question"][m]["held_out"] == pytest.approx(held_out)
        assert report.held_out["every question"][m]["pipeline"] == pytest.approx(
            np.mean([scores["default"][m][q] for q in folds]))
    # by shape: "How many barrels has Joss made for the brewery?" gathers, the rest point
    assert report.questions == {"every question": 9, "shape gathering": 1, "shape pinpoint": 8}
    written = json.loads(out.read_text())
    assert written["chosen"] == report.chosen and written["judgments"].startswith("the source's evidence turns")


def test_the_command_prints_each_folds_choice_and_the_held_out_figures(stores, capsys):
    assert main(["tune", str(stores), "--grid", "context_share=0,1"]) == 0
    text = capsys.readouterr().out
    assert "the point each fold was scored by:" in text
    for fold in ("locomo-1", "locomo-2", "locomo-3"):
        assert f"  {fold} (" in text
    assert "held out against default as it is" in text and "nDCG@10" in text
    first, *rest = text.splitlines()
    assert first == str(stores) and all(len(line) <= 80 for line in rest)


@pytest.mark.parametrize("grid,message", [
    (["no_such_setting=1,2"], "no_such_setting"),
    (["standout=0.5"], "standout"),                # below its bound
    (["context_share"], "NAME=V1,V2"),
    (["context_share=1", "context_share=2"], "given twice"),
])
def test_a_bad_grid_is_one_line_naming_it(stores, grid, message):
    with pytest.raises(GardenError) as caught:
        tune(stores, "default", grid)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_source_without_stores_or_with_one_fold_is_refused(stores, tmp_path, capsys):
    with pytest.raises(GardenError, match="one fold only"):
        tune(stores / "conv-1.json", "default", ["context_share=0,1"])
    assert main(["tune", str(REGRESSION), "--grid", "context_share=0,1"]) == 2
    assert "tune chooses over stores" in capsys.readouterr().err
    with pytest.raises(GardenError, match="--measure"):
        tune(stores, "default", ["context_share=0,1"], measure="AP")


def test_a_grid_names_each_setting_once():
    assert parse_grid(["a=1,2", "b=3"]) == {"a": ["1", "2"], "b": ["3"]}
    assert variant("default-phrase@bm25s:k1=1.2", {"standout": "2"}) == "default-phrase:standout=2@bm25s:k1=1.2"


def test_the_api_tunes_as_the_command_does(stores):
    import garden

    report = garden.tune(stores, "context_share=0,1")
    assert report == tune(stores, "default", ["context_share=0,1"]).to_json()
    assert set(report["chosen"]) == {"locomo-1", "locomo-2", "locomo-3"}
