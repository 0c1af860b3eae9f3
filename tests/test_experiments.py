"""The experiments run; their figures are the README's, not assertions here."""
from __future__ import annotations

from pathlib import Path

from experiments.standout_sweep import plot, sweep

ROOT = Path(__file__).resolve().parents[1]


def test_standout_sweep_shows_the_silent_store_flip(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    rows = sweep([str(ROOT / "regression" / "silent-store.yaml")], values=[1.0, 1.4])
    off, on = rows
    assert off["silent_kept"] < on["silent_kept"] == on["silent_total"]
    assert off["items_per_packet"] > on["items_per_packet"]
    png = plot(rows, tmp_path / "sweep.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_sweep_takes_any_setting_and_pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    case = [str(ROOT / "regression" / "silent-store.yaml")]
    low, shipped = sweep(case, values=[-10.0, 0.45], setting="answer_at")
    assert low["value"] == -10.0 and low["silent_kept"] < shipped["silent_kept"] == shipped["silent_total"]
    old = sweep(case, values=[1.4], pipeline_name="default-decide-fill")[0]
    assert old["pipeline"] == "default-decide-fill" and old["silent_kept"] == old["silent_total"]
