"""tests/encoded_once.py: a collection's vectors encoded by one process of a run, the others
waiting for it and then reading them back."""
from __future__ import annotations

import threading

import pytest

from encoded_once import encode_once, one_at_a_time
from garden.retrievers import Doc
from model_cache import empty_cache

DOCS = [Doc(str(i), f"the keeper of lamp {i} logs the storm over the northern bay") for i in range(40)]
QUERIES = ["who logs the storm", "northern bay lamp"]


@pytest.fixture
def empty(tmp_path, monkeypatch, exported_model):
    monkeypatch.setenv("GARDEN_CACHE", str(empty_cache(tmp_path / "cache", exported_model)))
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))


def test_the_second_call_encodes_nothing(empty, tmp_path_factory):
    assert encode_once(tmp_path_factory, "lamps", DOCS, QUERIES) == len(DOCS) + len(QUERIES)
    assert encode_once(tmp_path_factory, "lamps", DOCS, QUERIES) == 0


def test_a_lock_held_elsewhere_is_waited_for(tmp_path_factory):
    # two opens of the lock file are two holders to flock, as two workers' processes are
    held, release, order = threading.Event(), threading.Event(), []

    def hold() -> None:
        with one_at_a_time(tmp_path_factory, "waited"):
            held.set()
            release.wait(30)
            order.append("first released")

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        threading.Timer(0.5, release.set).start()
        with one_at_a_time(tmp_path_factory, "waited"):
            order.append("second taken")
    finally:
        release.set()
        holder.join(30)
    assert order == ["first released", "second taken"]
