"""The experiments run; their figures are the docs', not assertions here."""
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


def test_the_speed_experiments_fictional_file_is_in_the_released_schema(tmp_path):
    """The S-shaped file the LongMemEval speed run times must be one the importer accepts
    as released, with shared sessions and abstention questions, or the timing means nothing."""
    from experiments.longmemeval_speed import write_file
    from garden.formats.longmemeval import import_longmemeval

    path = tmp_path / "longmemeval_synthetic_s.json"
    shape = write_file(path, questions=12, sessions=6)
    assert shape["questions"] == 12 and shape["slots"] == 12 * 6
    report = import_longmemeval(path, tmp_path / "out")
    assert report.questions == 12 and report.abstention >= 1
    assert report.sessions < report.slots            # pool sessions shared between haystacks
    assert report.evidence_turns == 12 - report.abstention


def test_the_weights_experiment_refuses_a_bad_shard_in_one_line(capsys):
    import pytest

    from experiments.locomo_weights import main, parse_shard

    assert parse_shard("1/2") == (1, 2)
    for bad in ("2/2", "x/2", "1", "-1/3"):
        with pytest.raises(SystemExit) as exc:
            main([f"--shard={bad}", "/nonexistent"])
        assert exc.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error: argument --shard" in error and bad in error  # before any data is read
