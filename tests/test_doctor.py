"""`garden doctor` on temporary synthetic stores: enforced and report-only rules, a repair
that touches only mutable derived modes, the advisory on a green exit, and links leading
outside the store, at the top of a part and nested deeper, reported and never followed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest

from garden.cli import main

ATTACHMENT = b"Harbour log, 3 March: the Tidewell ferry left at dawn with two crates of lamp oil.\n"


def story_text(sha: str, path: str = "media/log.txt") -> str:
    return f"""story: tidewell
project: tidewell
topics: {{ferry: {{}}}}
records:
  - id: log.0303
    kind: source
    at: 2030-03-03
    text: The Tidewell ferry left at dawn with two crates of lamp oil.
    topics: [ferry]
    attachments:
      - {{path: {path}, sha256: {sha}}}
  - id: note.oil
    kind: note
    at: 2030-03-04
    text: Lamp oil is kept in the harbour shed.
"""


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store in a scratch folder: one story with one attachment, and derived data made by
    the garden itself (`garden check` writes the story's index)."""
    root = tmp_path / "store"
    (root / "fixtures" / "media").mkdir(parents=True)
    (root / "fixtures" / "media" / "log.txt").write_bytes(ATTACHMENT)
    (root / "fixtures" / "tidewell.yaml").write_text(story_text(hashlib.sha256(ATTACHMENT).hexdigest()),
                                                     encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.delenv("GARDEN_HOME", raising=False)
    monkeypatch.setenv("GARDEN_TRACE", "1")
    assert main(["check"]) == 0
    return root


@pytest.fixture
def outside(tmp_path):
    """A folder beside the store that no repair may touch: a story-like file, world-writable."""
    folder = tmp_path / "outside"
    folder.mkdir()
    victim = folder / "victim.yaml"
    victim.write_bytes(b"story: victim\n")
    os.chmod(victim, 0o666)
    return folder


def doctor(capsys, *args):
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    return code, out, err


def doctor_json(capsys, *args):
    code, out, _ = doctor(capsys, "--json", *args)
    return code, json.loads(out)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fresh_derived_data_is_owner_only_and_the_store_is_green(store, capsys):
    capsys.readouterr()
    assert main(["query", "tidewell", "when did the ferry leave?", "--pipeline", "bm25"]) == 0  # writes a trace
    os.chmod(store / "fixtures" / "media" / "log.txt", 0o444)
    code, out, _ = doctor(capsys)
    assert code == 0, out
    assert mode(store / ".garden") == 0o700 and mode(store / ".garden" / "index" / "tidewell.json") == 0o600
    [trace] = (store / ".garden" / "traces").glob("*.jsonl")
    assert mode(trace) == 0o600
    assert out.splitlines()[-1].startswith("checked 1 stories, 1 attachments, ")
    assert "0 enforced, 0 advisory; exit 0" in out


def test_the_owner_only_breach_and_the_writable_attachment_are_both_shown_and_the_check_fails(store, capsys):
    index = store / ".garden" / "index" / "tidewell.json"
    os.chmod(index, 0o644)
    os.chmod(store / "fixtures" / "media" / "log.txt", 0o644)
    code, out, _ = doctor(capsys)
    assert code == 1
    lines = out.splitlines()
    assert ("ENFORCED derived-owner-only .garden/index/tidewell.json: file mode 0644 grants group or other "
            "access; repair: chmod 0600") in lines
    [advisory] = [line for line in lines if "attachment-read-only" in line]
    assert advisory.startswith("advisory attachment-read-only fixtures/media/log.txt: mode 0644 has write bits")
    assert "repair: none" in advisory
    assert lines[-1].endswith("1 enforced, 1 advisory; exit 1")

    code, report = doctor_json(capsys)
    assert code == 1 and report["exit"] == 1
    found = {(f["rule"], f["enforcement"], f["path"]) for f in report["findings"]}
    assert found == {("derived-owner-only", "enforced", ".garden/index/tidewell.json"),
                     ("attachment-read-only", "report-only", "fixtures/media/log.txt")}
    assert report["rules"]["attachment-read-only"] == "report-only"
    assert report["checked"]["attachments"] == 1


def test_repair_fixes_the_derived_mode_and_leaves_the_attachment_bytes_and_mode_unchanged(store, capsys):
    index = store / ".garden" / "index" / "tidewell.json"
    attachment = store / "fixtures" / "media" / "log.txt"
    os.chmod(index, 0o644)
    os.chmod(store / ".garden" / "index", 0o755)
    os.chmod(attachment, 0o664)
    before = (digest(attachment), mode(attachment), os.stat(attachment).st_mtime_ns)

    code, out, _ = doctor(capsys, "--repair")
    assert code == 0, out
    assert "repaired derived-owner-only .garden/index/tidewell.json: mode 0644 -> 0600" in out
    assert "repaired derived-owner-only .garden/index: mode 0755 -> 0700" in out
    assert mode(index) == 0o600 and mode(store / ".garden" / "index") == 0o700
    assert (digest(attachment), mode(attachment), os.stat(attachment).st_mtime_ns) == before

    code, report = doctor_json(capsys, "--repair")  # a second repair finds nothing to change
    assert code == 0 and report["repaired"] == []
    assert (digest(attachment), mode(attachment)) == before[:2]


def test_a_green_exit_still_prints_the_remaining_advisory(store, capsys):
    os.chmod(store / "fixtures" / "media" / "log.txt", 0o644)
    code, out, _ = doctor(capsys)
    assert code == 0
    assert "advisory attachment-read-only fixtures/media/log.txt" in out
    assert out.splitlines()[-1].endswith("0 enforced, 1 advisory; exit 0")
    code, report = doctor_json(capsys)
    assert code == 0 and report["advisories"] == 1 and report["enforced"] == 0


def test_changed_attachment_bytes_fail_and_no_repair_rewrites_them(store, capsys):
    attachment = store / "fixtures" / "media" / "log.txt"
    attachment.write_bytes(ATTACHMENT.replace(b"two", b"six"))
    os.chmod(attachment, 0o444)
    changed = digest(attachment)
    code, out, _ = doctor(capsys, "--repair")
    assert code == 1
    [line] = [line for line in out.splitlines() if "attachment-hash" in line]
    assert line.startswith("ENFORCED attachment-hash fixtures/media/log.txt: record log.0303 attachments[0]:")
    assert f"hash to {changed}" in line and "repaired" not in out
    assert digest(attachment) == changed and mode(attachment) == 0o444


@pytest.mark.parametrize("where, fault, needle", [
    ("media/log.txt", "edit", "field attachments[0].sha256: 'media/log.txt': its bytes hash to"),
    ("media/gone.txt", None, "field attachments[0].path: 'media/gone.txt': no such file"),
    ("../outside.txt", None, "field attachments[0].path: '../outside.txt' leaves the story's folder"),
    ("/etc/hostname", None, "field attachments[0].path: '/etc/hostname' is not a relative path"),
    ('"media/\\0log.txt"', None, "field attachments[0].path: 'media/\\x00log.txt' is not a relative path"),
    ("linked/log.txt", "link", "field attachments[0].path: 'linked/log.txt' leaves the story's folder"),
])
def test_check_locates_each_bad_attachment(store, tmp_path, capsys, where, fault, needle):
    story = store / "fixtures" / "tidewell.yaml"
    (tmp_path / "outside.txt").write_bytes(ATTACHMENT)
    if fault == "edit":
        (store / "fixtures" / "media" / "log.txt").write_bytes(b"rewritten\n")
    if fault == "link":
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "log.txt").write_bytes(ATTACHMENT)
        (store / "fixtures" / "linked").symlink_to(tmp_path / "elsewhere")
    story.write_text(story_text(hashlib.sha256(ATTACHMENT).hexdigest(), where), encoding="utf-8")
    capsys.readouterr()
    code = main(["check", "tidewell"])
    out = capsys.readouterr().out
    assert code == 1
    [line] = [line for line in out.splitlines() if "attachments[0]" in line]
    assert line.startswith(f"{Path('fixtures/tidewell.yaml').resolve()}: record log.0303: ") or \
        line.startswith("fixtures/tidewell.yaml: record log.0303: "), line
    assert needle in line


def _assert_untouched(outside: Path, link: Path, capsys, store: Path):
    victim = outside / "victim.yaml"
    code, out, _ = doctor(capsys, "--repair")
    assert code == 1
    shown = str(link.relative_to(store))
    [line] = [line for line in out.splitlines() if line.startswith("ENFORCED link-contained")]
    assert line.startswith(f"ENFORCED link-contained {shown}: symbolic link resolves to {outside}")
    assert "not followed" in line and "victim" not in out and "repaired" not in out
    assert mode(victim) == 0o666 and victim.read_bytes() == b"story: victim\n"
    assert link.is_symlink() and os.readlink(link) == str(outside)


@pytest.mark.parametrize("top", ["fixtures", ".garden/traces"])
def test_a_linked_folder_at_the_top_of_a_part_pointing_outside_is_reported_not_followed(store, outside, capsys,
                                                                                        top):
    link = store / top
    if top == "fixtures":
        (outside / "tidewell.yaml").write_bytes((store / "fixtures" / "tidewell.yaml").read_bytes())
        (store / "fixtures" / "tidewell.yaml").unlink()
        (store / "fixtures" / "media" / "log.txt").unlink()
        (store / "fixtures" / "media").rmdir()
        (store / "fixtures").rmdir()
    link.symlink_to(outside)
    _assert_untouched(outside, link, capsys, store)
    code, report = doctor_json(capsys)
    assert report["checked"]["links"] == 1
    if top == "fixtures":
        assert report["checked"]["stories"] == 0  # the stories behind the link are not read


@pytest.mark.parametrize("nested", ["fixtures/media/deep/elsewhere", ".garden/embeddings/model/elsewhere"])
def test_a_linked_folder_nested_deeper_pointing_outside_is_reported_not_followed(store, outside, capsys, nested):
    link = store / nested
    folder = link.parent
    for part in reversed([folder, *folder.parents]):  # owner-only, as the garden makes folders: only the link is wrong
        if part.is_relative_to(store) and not part.exists():
            part.mkdir(mode=0o700)
    link.symlink_to(outside)
    _assert_untouched(outside, link, capsys, store)


def test_a_link_that_stays_inside_the_store_is_counted_and_allowed(store, capsys):
    (store / "fixtures" / "media" / "again").symlink_to(store / "fixtures" / "media")
    os.chmod(store / "fixtures" / "media" / "log.txt", 0o444)
    code, report = doctor_json(capsys)
    assert code == 0, report["findings"]
    assert report["checked"]["links"] == 1 and report["findings"] == []


def test_a_root_that_is_not_a_folder_is_bad_input(store, capsys):
    root = str(store / "nowhere")
    code, out, err = doctor(capsys, "--root", root)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "not a folder" in err
    # the root as given, or its start when a long temporary folder passes the bound of a
    # shown value (then cut with an ellipsis): the test must not hang on the folder's length
    shown = re.search(r"--root '([^']*)'", err).group(1)
    assert shown == root or (shown.endswith("…") and root.startswith(shown[:-1]))


def test_a_story_that_cannot_be_read_is_an_enforced_finding(store, capsys):
    (store / "fixtures" / "torn.yaml").write_text("story: torn\nrecords: [\n", encoding="utf-8")
    code, out, _ = doctor(capsys)
    assert code == 1
    [line] = [line for line in out.splitlines() if "story-readable" in line]
    assert line.startswith("ENFORCED story-readable fixtures/torn.yaml: its attachments cannot be listed: ")


def test_doctor_reports_derived_data_another_user_owns(tmp_path, monkeypatch, capsys):
    """The tests run as one user, so the other owner is simulated where the rule asks who
    runs the garden."""
    import garden.store.doctor as doctor_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    (tmp_path / ".garden" / "index").mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / ".garden", 0o700)
    saved = tmp_path / ".garden" / "index" / "planted.pkl"
    saved.write_bytes(b"x")
    os.chmod(saved, 0o600)
    monkeypatch.setattr(doctor_mod.os, "geteuid", lambda: os.stat(saved).st_uid + 1)
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code != 0 and "derived-owner" in out and "planted.pkl" in out and "owned by uid" in out
