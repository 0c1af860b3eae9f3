"""The reranker's move to named stages changed no verdict: every case under every pipeline
passes or fails as recorded before the move, failing the same expectations.

What is compared is what a case asserts: its verdict and, for each failure, the expectation
that failed (its kind and the records it names), not the packet it got. A failure's tail
says what the pipeline returned instead (a whole ranking, a position, a rejection reason),
and a near-tie deep in a bare dense ranking orders differently on another processor
(docs/encoding.md, "Between machines") without any expectation passing or failing otherwise.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from garden.evaluation.runner import contrast

RECORDED = json.loads((Path(__file__).parent / "data" / "contrast-before-stages.json").read_text())

# where a failure stops saying what was expected and starts saying what came instead
# (garden/formats/cases.py, `check`): ", got ...", ", but it ...", " at position N", " (...)"
GOT = re.compile(r", got |, but | at position | \(")


def asserted(failure: str) -> str:
    """The expectation a failure reports, without what the pipeline returned instead."""
    return GOT.split(failure, maxsplit=1)[0]


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
            now_failed = [asserted(f) for f in cell["failures"]]
            assert now_failed == [asserted(f) for f in recorded["failures"][pipeline]], (case, pipeline)
