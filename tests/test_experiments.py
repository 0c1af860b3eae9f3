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
