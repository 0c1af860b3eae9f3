"""A user's cache for a test: one folder a module shares (its models exported once), or an
empty embedding cache that still holds the exported model."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache folder for the module: each model and backend is exported once, not once per test."""
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture
def cache(shared_cache, monkeypatch) -> Path:
    """The module's cache as GARDEN_CACHE (a module imports both fixtures to use it)."""
    monkeypatch.setenv("GARDEN_CACHE", str(shared_cache))
    return shared_cache


def empty_cache(folder: Path, exported: Path) -> Path:
    """`folder` as an embedding cache holding no vector but the exported model: a test that
    counts what is encoded needs an empty cache, not a second export of the model (seconds
    each). Linked where the file system allows, else copied."""
    target = folder / exported.relative_to(exported.parents[2])
    target.parent.mkdir(parents=True)
    try:
        os.link(exported, target)
    except OSError:
        shutil.copyfile(exported, target)
    return folder
