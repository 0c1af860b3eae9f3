"""A story written by hand in DESIGN.md's format, outside the project, behaves the same
way with no code change: its own topics, entities, decisions and states, its own named
phrase against its own chatty distractor in another language (Japanese), its own controls.

The files live in tests/data/handwritten and are copied to a scratch folder, so the
garden runs them from a directory that has no fixtures/ at all.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from garden.cli import main

DATA = Path(__file__).parent / "data" / "handwritten"


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    root = tmp_path_factory.mktemp("elsewhere")
    shutil.copytree(DATA, root, dirs_exist_ok=True)
    return root


def run_json(args, capsys, monkeypatch, cwd):
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("GARDEN_HOME", str(cwd / ".garden"))
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_every_handwritten_case_passes_under_default(elsewhere, capsys, monkeypatch):
    code, data = run_json(["run", "cases"], capsys, monkeypatch, elsewhere)
    assert code == 0
    failures = {r["case"]: r["failures"] + [c["failures"] for c in r["controls"] if not c["passed"]]
                for r in data["results"] if not r["passed"]}
    assert failures == {}
    assert {r["case"] for r in data["results"]} == {"similar", "changed", "scoped", "phrase", "silent"}
    assert data["triage_fallbacks"]["count"] == 0


def test_bare_bm25_lets_the_chatty_distractor_lead(elsewhere, capsys, monkeypatch):
    code, data = run_json(["run", "cases/phrase.yaml", "--pipeline", "bm25"], capsys, monkeypatch, elsewhere)
    result = data["results"][0]
    assert code == 0  # not a regression suite: a failure is reported, never an exit 1
    assert not result["passed"]
    assert "lead: expected log.week3, got chat.stove" in result["failures"]


def test_bare_bm25_packs_the_coffee_preference(elsewhere, capsys, monkeypatch):
    _, data = run_json(["run", "cases/similar.yaml", "--pipeline", "bm25"], capsys, monkeypatch, elsewhere)
    failures = data["results"][0]["failures"]
    assert any(f.startswith("rejected: expected pref.oskar.coffee rejected as off_topic") for f in failures)


def test_the_quiet_store_stays_silent_where_a_bare_baseline_answers(elsewhere, capsys, monkeypatch):
    query = ["query", "world/tidewell-light.yaml", "Did we ever repaint the boathouse roof after the gale?",
             "--as-of", "2031-03-10"]
    _, packet = run_json(query, capsys, monkeypatch, elsewhere)
    assert packet["decision"] == "retrieve" and packet["items"] == []
    _, bare = run_json([*query, "--pipeline", "dense"], capsys, monkeypatch, elsewhere)
    assert bare["items"], "a bare embedding baseline always has a nearest record to offer"
