"""Shared fixtures for the tests."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# every property test sees the same examples on every machine and every run: derandomized,
# no example database carried between runs, no deadline on a busy machine
settings.register_profile("garden", derandomize=True, database=None, deadline=None)
settings.load_profile("garden")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the shipped stories and cases in a scratch folder, as the working
    directory, with its own derived-data folder."""
    for name in ("fixtures", "regression", "challenge"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    return tmp_path


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A scratch working folder with its own derived-data folder (a module may define its
    own `home` where it needs more)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    return tmp_path
