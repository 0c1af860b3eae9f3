"""Shared fixtures for the tests."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# pytest-xdist's workers set COLUMNS=80, and the garden reads COLUMNS as the reader's width
# (report lines wrapped to it): every test sees the output a pipe gets, unless it sets a
# width itself (tests/test_terminal_width.py)
os.environ.pop("COLUMNS", None)

# every property test sees the same examples on every machine and every run: derandomized,
# no example database carried between runs, no deadline on a busy machine
settings.register_profile("garden", derandomize=True, database=None, deadline=None)
settings.load_profile("garden")

# The suite runs on the machine's cores, one module per worker (pyproject's addopts). These
# modules take minutes where the rest take seconds: collected first, each starts at once on
# a worker of its own, instead of being the last thing the run waits for.
LONGEST_FIRST = ("test_locomo_compare.py", "test_longmemeval_dev.py", "test_vaswani.py", "test_longmemeval_dev2.py",
                 "test_encoders.py", "test_own_models.py", "test_notebooks.py", "test_properties.py", "test_scale.py")


def pytest_collection_modifyitems(items):
    """Order the long modules first (a stable sort: every module keeps its own order)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def exported_model() -> Path:
    """The default dense backend's exported model in this run's own cache, exported there
    once if it is missing."""
    from garden.retrievers._encoders import exported_file, load_encoder
    from garden.retrievers.dense import DEFAULT_BACKEND, model_dir

    load_encoder(DEFAULT_BACKEND, model_dir())
    return exported_file(DEFAULT_BACKEND, model_dir())


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
