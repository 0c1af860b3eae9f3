"""The cost curve's small points (1,000 and 10,000 records), as CI runs them: every figure
is there and every generated case is a contrast at both sizes. Timings are printed by the
benchmark and quoted in docs/scale.md, never asserted."""
from __future__ import annotations

import math

from experiments.scale import KINDS, PIPELINES, plot, run


def test_the_small_points_of_the_cost_curve(tmp_path):
    report = run([1000, 10_000], rounds=1, work=tmp_path)
    assert report["sizes"] == [1000, 10_000]
    for size, figures in report["results"].items():
        assert figures["records"] == int(size)
        # a fresh cache after the cold build loads the save it wrote, and builds nothing
        assert all(figures["warm"][k] == {"loaded": 1, "built": 0} for k in KINDS), figures["warm"]
        passed = figures["cases_passed"]
        assert passed["default"]["passed"] == passed["default"]["of"] >= 10
        assert passed["bm25s"]["passed"] < passed["bm25s"]["of"]  # the cases are contrasts
        assert set(figures["query_ms"]) == set(PIPELINES)
        assert figures["queries"] > passed["default"]["of"]  # the controls ran too
        assert all(v["p50"] <= v["p95"] for v in figures["query_ms"].values())
    assert all(s is None or math.isfinite(s) for s in report["slopes"].values())
    assert report["slopes"]["load story (s)"] is not None
    assert set(report["at_largest"]) == {"default_p50_ms", "default_p95_ms", "lexical_build_s", "saved_load_s",
                                         "peak_mb", "steepest_stage_slope"}
    png = plot({int(k): v for k, v in report["results"].items()}, tmp_path / "scale.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
