"""The reranker's move to named stages changed no verdict: every case under every pipeline
passes or fails as recorded before the move, with the same failures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from garden.evaluation.runner import contrast

RECORDED = json.loads((Path(__file__).parent / "data" / "contrast-before-stages.json").read_text())


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = Path(__file__).resolve().parents[1]
        mp.chdir(root)
        mp.setenv("GARDEN_TRACE", "0")
        report = contrast([str(root / "regression"), str(root / "challenge")])
        yield report.to_json()


def test_every_recorded_verdict_is_unchanged(matrix):
    now = {row["case"]: row for row in matrix["cases"]}
    assert set(RECORDED["pipelines"]) <= set(matrix["pipelines"])
    for case, recorded in RECORDED["cases"].items():
        assert case in now, f"{case} is no longer run"
        # recorded when any failing baseline made a contrast; a contrast now also needs
        # default to pass (a case default fails too is a known miss)
        assert now[case]["contrast"] == (recorded["contrast"] and recorded["passed"]["default"]), case
        for pipeline, passed in recorded["passed"].items():
            cell = now[case]["pipelines"][pipeline]
            assert cell["passed"] == passed, (case, pipeline, cell["failures"])
            assert cell["failures"] == recorded["failures"][pipeline], (case, pipeline)
