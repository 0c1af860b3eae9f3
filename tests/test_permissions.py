"""Permission faults as the kernel gives them: each command runs as a user who really
cannot read or write what the test takes away (tests/other_user.py), never a stand-in
that raises PermissionError. Each fault is one located line, a non-zero exit, and nothing
half-written."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from other_user import give_away, keep_from_other_user, run_as_other_user, shared_folder

STORY = """story: saltmarsh
project: saltmarsh
topics: {tide: {}}
records:
  - id: log.tide
    kind: note
    at: 2031-05-02
    text: The spring tide reached the second marker of the saltmarsh boardwalk.
    topics: [tide]
"""
CASE = """id: tide-marker
story: saltmarsh
as_of: 2031-05-03
query: How high did the spring tide reach?
expect: {include: [log.tide]}
"""


@pytest.fixture
def store():
    root = shared_folder()
    (root / "fixtures").mkdir()
    (root / "regression").mkdir()
    (root / "fixtures" / "saltmarsh.yaml").write_text(STORY, encoding="utf-8")
    (root / "regression" / "tide-marker.yaml").write_text(CASE, encoding="utf-8")
    give_away(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def garden(store: Path, *argv: str, home: Path | None = None) -> tuple[int, str, str]:
    # the other user has a cache of their own, as every user does (the platform's per-user folder)
    env = {"GARDEN_HOME": str(home or store / ".garden"), "GARDEN_TRACE": "0", "GARDEN_CACHE": str(store / ".cache")}
    return run_as_other_user(list(argv), store, env)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_other_user_can_work_in_the_store(store):
    """The baseline the faults below are measured against: nothing taken away, it works."""
    code, out, err = garden(store, "run", "regression", "--pipeline", "bm25")
    assert code == 0, err
    assert "tide-marker" in out


def test_backup_fails_naming_a_folder_it_cannot_list(store):
    keep_from_other_user(store / "regression", 0o700)
    archive = store / "store.tar.gz"
    code, _, err = garden(store, "backup", "--out", str(archive), "--pipeline", "bm25")
    assert code == 2 and "regression" in one_line(err) and "Permission denied" in err
    assert not archive.exists()


def test_backup_fails_naming_a_file_it_cannot_read(store):
    keep_from_other_user(store / "regression" / "tide-marker.yaml", 0o600)
    archive = store / "store.tar.gz"
    code, _, err = garden(store, "backup", "--out", str(archive), "--pipeline", "bm25")
    line = one_line(err)
    assert code != 0 and "tide-marker.yaml" in line, err
    assert not archive.exists()


def test_doctor_on_a_home_it_cannot_read_fails(store):
    home = store / ".garden"
    (home / "index").mkdir(parents=True)
    keep_from_other_user(home, 0o700)
    code, out, err = garden(store, "doctor")
    assert code != 0 and "Traceback" not in err
    assert ".garden" in out + err


def test_a_query_with_a_home_it_cannot_write_is_one_line(store):
    home = store / "home"
    home.mkdir()
    keep_from_other_user(home, 0o755)   # it can read and enter, not write
    code, _, err = garden(store, "query", "saltmarsh", "How high did the tide reach?", "--pipeline", "bm25",
                          home=home)
    line = one_line(err)
    assert code == 2 and str(home) in line and "cannot" in line


def test_a_save_another_user_owns_is_never_read_and_doctor_names_it(store):
    """A save the other user did not write (here: the test user's, in the other user's
    home) is neither loaded nor trusted; doctor reports its owner."""
    code, _, err = garden(store, "query", "saltmarsh", "spring tide", "--pipeline", "bm25")
    assert code == 0, err
    [save] = (store / ".garden" / "index").glob("saltmarsh.retriever_bm25.*.npz")
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user: the other-owner case needs it")
    os.chown(save, 0, 0)
    os.chmod(save, 0o644)   # readable, so only the owner check can keep it out
    code, out, err = garden(store, "query", "saltmarsh", "spring tide", "--pipeline", "bm25")
    assert code == 0 and "saved index not loaded: owned by uid 0" in err
    assert save.stat().st_uid != 0      # removed, and the rebuild saved the other user's own
    os.chown(save, 0, 0)
    code, out, _ = garden(store, "doctor")
    assert code != 0 and "derived-owner" in out and save.name in out
