"""`garden backup` and `garden restore`: the durable part archived with a manifest of
hashes, and a restore drill that shows the restored store answers its cases as the
original did. A truncated or tampered archive is refused naming the member, and nothing
is left half-restored. Cases run under the bare `bm25` pipeline: the drill compares
verdicts and answers whatever the pipeline, and bm25 needs no embedding model.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from garden.cli import main
from garden.store.manifest import MANIFEST, MANIFEST_HASH

ATTACHMENT = b"Harbour log, 3 March: the Tidewell ferry left at dawn with two crates of lamp oil.\n"
STORY = """story: tidewell
project: tidewell
topics: {{ferry: {{}}, harbour: {{}}}}
records:
  - id: log.0303
    kind: source
    at: 2030-03-03
    text: The Tidewell ferry left at dawn with two crates of lamp oil.
    topics: [ferry]
    attachments:
      - {{path: media/log.txt, sha256: {sha}}}
  - id: note.shed
    kind: note
    at: 2030-03-04
    text: Lamp oil is kept in the harbour shed behind the net loft.
    topics: [harbour]
"""
PASSING = """id: ferry-dawn
story: tidewell
as_of: 2030-03-05
query: When did the ferry leave?
expect: {include: [log.0303]}
"""
FAILING = """id: shed-only
story: tidewell
as_of: 2030-03-05
query: Where is the lamp oil kept?
expect: {exclude: [log.0303]}
"""


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A store: one story with a read-only attachment, a regression case bm25 passes and a
    challenge case it fails, and derived data (which the backup must leave out)."""
    root = tmp_path / "store"
    for folder in ("fixtures/media", "regression", "challenge"):
        (root / folder).mkdir(parents=True)
    attachment = root / "fixtures" / "media" / "log.txt"
    attachment.write_bytes(ATTACHMENT)
    os.chmod(attachment, 0o444)
    (root / "fixtures" / "tidewell.yaml").write_text(STORY.format(sha=hashlib.sha256(ATTACHMENT).hexdigest()),
                                                     encoding="utf-8")
    (root / "regression" / "ferry-dawn.yaml").write_text(PASSING, encoding="utf-8")
    (root / "challenge" / "shed-only.yaml").write_text(FAILING, encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.delenv("GARDEN_HOME", raising=False)
    assert main(["run", "--pipeline", "bm25"]) == 0  # derived data: an index cache, a trace
    assert (root / ".garden" / "traces").is_dir()
    return root


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def archive(store, tmp_path, capsys):
    path = tmp_path / "store.tar.gz"
    code, out, err = cli(capsys, "backup", "--out", str(path), "--pipeline", "bm25")
    assert code == 0, err
    assert "4 durable files" in out and "2 case verdicts under bm25" in out
    return path


def members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path, "r:gz") as tar:
        return [(info, tar.extractfile(info).read() if info.isreg() else b"") for info in tar]


def rewrite(path: Path, out: Path, change) -> Path:
    """A copy of an archive, each member passed through `change(info, data) -> data`."""
    with tarfile.open(out, "w:gz") as tar:
        for info, data in members(path):
            data = change(info, data)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".restore-" in p.name)


def test_the_archive_holds_the_durable_part_and_its_manifest_and_no_derived_data(store, archive, tmp_path, capsys):
    names = [info.name for info, _ in members(archive)]
    assert names == [MANIFEST, MANIFEST_HASH, "challenge/shed-only.yaml", "fixtures/media/log.txt",
                     "fixtures/tidewell.yaml", "regression/ferry-dawn.yaml"]
    contents = dict((info.name, data) for info, data in members(archive))
    manifest = json.loads(contents[MANIFEST])
    assert contents[MANIFEST_HASH].decode().strip() == hashlib.sha256(contents[MANIFEST]).hexdigest()
    for entry in manifest["files"]:
        assert entry["sha256"] == hashlib.sha256((store / entry["path"]).read_bytes()).hexdigest()
    assert {v["case"]: v["passed"] for v in manifest["verdicts"]} == {
        "challenge/shed-only.yaml": False, "regression/ferry-dawn.yaml": True}
    # the same store gives the same bytes: no clock, no owner in the archive
    again = tmp_path / "again.tar.gz"
    assert cli(capsys, "backup", "--out", str(again), "--pipeline", "bm25")[0] == 0
    assert again.read_bytes() == archive.read_bytes()
    # an existing file is never overwritten
    code, _, err = cli(capsys, "backup", "--out", str(again), "--pipeline", "bm25")
    assert code == 2 and "exists" in err and again.read_bytes() == archive.read_bytes()


def test_a_restore_drill_succeeds_and_the_restored_store_answers_as_the_original(store, archive, tmp_path, capsys):
    into = tmp_path / "restored"
    code, out, err = cli(capsys, "restore", str(archive), "--into", str(into), "--verify")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"restored 4 files from {archive} into {into}; every hash matches")
    assert "match challenge/shed-only.yaml: failed, same answers" in lines
    assert "match regression/ferry-dawn.yaml: passed, same answers" in lines
    assert lines[-1].endswith("2 cases under bm25: 2 match the original, 0 differ; exit 0")
    for name in ("fixtures/tidewell.yaml", "fixtures/media/log.txt", "regression/ferry-dawn.yaml"):
        assert (into / name).read_bytes() == (store / name).read_bytes()
    assert stat.S_IMODE(os.stat(into / "fixtures" / "media" / "log.txt").st_mode) == 0o444  # still frozen
    assert (into / ".garden" / "index" / "tidewell.json").is_file()  # derived data rebuilt there
    assert leftovers(tmp_path) == []
    code, out, _ = cli(capsys, "doctor", "--root", str(into))
    assert code == 0, out


def test_a_tampered_member_is_refused_by_name_and_nothing_is_restored(archive, tmp_path, capsys):
    tampered = rewrite(archive, tmp_path / "tampered.tar.gz",
                       lambda info, data: data.replace(b"two", b"six") if info.name.endswith("log.txt") else data)
    into = tmp_path / "restored"
    code, out, err = cli(capsys, "restore", str(tampered), "--into", str(into), "--verify")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(f"garden: {tampered}: member 'fixtures/media/log.txt': its bytes hash to ")
    assert line.endswith("; nothing restored")
    assert not into.exists() and leftovers(tmp_path) == []


def test_a_truncated_archive_is_refused_by_member_and_nothing_is_restored(archive, tmp_path, capsys):
    data = archive.read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        truncated = tmp_path / f"cut-{cut}.tar.gz"
        truncated.write_bytes(data[:cut])
        into = tmp_path / f"restored-{cut}"
        code, out, err = cli(capsys, "restore", str(truncated), "--into", str(into))
        assert code == 2 and out == ""
        [line] = err.strip().splitlines()
        assert line.startswith(f"garden: {truncated}: ") and "member '" in line, line
        assert "truncated or damaged" in line and line.endswith("; nothing restored")
        assert not into.exists() and leftovers(tmp_path) == []


def test_an_altered_manifest_is_named_as_such(archive, tmp_path, capsys):
    altered = rewrite(archive, tmp_path / "altered.tar.gz",
                      lambda info, data: data.replace(b'"bm25"', b'"tfidf"') if info.name == MANIFEST else data)
    code, _, err = cli(capsys, "restore", str(altered), "--into", str(tmp_path / "r"))
    assert code == 2 and f"member '{MANIFEST}': its bytes do not match {MANIFEST_HASH}" in err
    assert not (tmp_path / "r").exists()


def _crafted(tmp_path: Path, archive: Path, extra: tarfile.TarInfo, data: bytes = b"") -> Path:
    out = tmp_path / "crafted.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for info, content in members(archive)[:2]:
            tar.addfile(info, io.BytesIO(content))
        extra.size = len(data)
        tar.addfile(extra, io.BytesIO(data))
    return out


@pytest.mark.parametrize("name, kind, needle", [
    ("../escaped.yaml", tarfile.REGTYPE, "not a plain relative path"),
    ("/tmp/escaped.yaml", tarfile.REGTYPE, "not a plain relative path"),
    ("fixtures/escaped.yaml", tarfile.SYMTYPE, "not a regular file"),
    ("fixtures/hard.yaml", tarfile.LNKTYPE, "not a regular file"),
    (".garden/index/x.json", tarfile.REGTYPE, "outside the durable folders"),
])
def test_members_that_would_escape_or_link_are_refused(archive, tmp_path, capsys, name, kind, needle):
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind != tarfile.REGTYPE:
        info.linkname = "/etc/passwd"
    crafted = _crafted(tmp_path, archive, info, b"story: escaped\n" if kind == tarfile.REGTYPE else b"")
    into = tmp_path / "sub" / "restored"
    into.parent.mkdir()
    code, _, err = cli(capsys, "restore", str(crafted), "--into", str(into))
    assert code == 2 and f"member {name!r}: " in err and needle in err, err
    assert not into.exists() and list(into.parent.iterdir()) == []
    assert not (tmp_path / "escaped.yaml").exists()


def test_a_non_empty_target_is_refused_and_left_as_it_was(archive, tmp_path, capsys):
    into = tmp_path / "busy"
    into.mkdir()
    (into / "keep.txt").write_text("mine", encoding="utf-8")
    code, _, err = cli(capsys, "restore", str(archive), "--into", str(into))
    assert code == 2 and "not empty" in err
    assert [p.name for p in into.iterdir()] == ["keep.txt"]


def test_matching_hashes_do_not_prove_the_store_answers_the_same(archive, tmp_path, capsys):
    """A case edited and the manifest rewritten to match: every hash checks out, and only
    running the cases shows the restored store no longer answers as the original did."""
    def edit(info, data):
        return data.replace(b"include: [log.0303]", b"include: [note.shed]") if info.name.startswith("regression/") \
            else data

    edited = rewrite(archive, tmp_path / "edited-once.tar.gz", edit)
    contents = {info.name: data for info, data in members(edited)}
    manifest = json.loads(contents[MANIFEST])
    for entry in manifest["files"]:
        entry["sha256"] = hashlib.sha256(contents[entry["path"]]).hexdigest()
        entry["size"] = len(contents[entry["path"]])
    text = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    forged = rewrite(edited, tmp_path / "forged.tar.gz", lambda info, data: text if info.name == MANIFEST else
                     (hashlib.sha256(text).hexdigest() + "\n").encode() if info.name == MANIFEST_HASH else data)
    into = tmp_path / "restored"
    code, out, err = cli(capsys, "restore", str(forged), "--into", str(into), "--verify")
    assert code == 1, err
    assert "every hash matches the manifest" in out.splitlines()[0]
    assert "MISMATCH regression/ferry-dawn.yaml: passed in the original, failed restored" in out
    assert "match challenge/shed-only.yaml: failed, same answers" in out
    assert out.splitlines()[-1].endswith("1 match the original, 1 differ; exit 1")


def test_a_manifest_with_a_bad_mode_and_size_names_each_field(archive, tmp_path, capsys):
    """Consistent with its hash but not a manifest: every field at fault is named, with its
    value, not pydantic's bare "1 validation error for Manifest"."""
    def change(info, data):
        if info.name == MANIFEST:
            manifest = json.loads(data)
            manifest["files"][0]["mode"] = "rwx"
            manifest["files"][1]["size"] = -5
            return json.dumps(manifest).encode()
        if info.name == MANIFEST_HASH:
            return b""       # replaced below, once the manifest's new bytes are known
        return data

    first = rewrite(archive, tmp_path / "first.tar.gz", change)
    text = dict((i.name, d) for i, d in members(first))[MANIFEST]
    crafted = rewrite(first, tmp_path / "crafted.tar.gz", lambda info, data: (
        (hashlib.sha256(text).hexdigest() + "\n").encode() if info.name == MANIFEST_HASH else data))
    code, _, err = cli(capsys, "restore", str(crafted), "--into", str(tmp_path / "r"))
    assert code == 2 and "validation error for" not in err
    assert "field files.0.mode" in err and "'rwx'" in err and "field files.1.size" in err
    assert not (tmp_path / "r").exists()


def test_a_folder_that_cannot_be_listed_fails_backup_and_doctor_naming_it(store, tmp_path, capsys, monkeypatch):
    """As the user who cannot read it would meet it (the tests run as a user who can read
    anything, so the listing's refusal is simulated where the walk asks for it)."""
    import garden.store.doctor as doctor_mod

    real = os.listdir
    hidden = store / "regression"

    def listdir(path):
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(doctor_mod.os, "listdir", listdir)
    out = tmp_path / "b.tar.gz"
    code, _, err = cli(capsys, "backup", "--out", str(out), "--pipeline", "bm25")
    assert code == 2 and "regression" in err and "cannot be listed (Permission denied)" in err
    assert not out.exists()
    code, text, _ = cli(capsys, "doctor")
    assert code != 0 and "folder-readable" in text and "Permission denied" in text


def test_a_file_rewritten_while_it_is_read_fails_backup(store, tmp_path, capsys, monkeypatch):
    import garden._files as files_mod

    real = files_mod.open_regular
    victim = store / "regression" / "ferry-dawn.yaml"

    class WrittenWhileRead:
        """The file as the backup reads it, with a writer appending to it mid-read."""

        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def fileno(self):
            return self.fh.fileno()

        def read(self, *args):
            data = self.fh.read(*args)
            with open(victim, "a", encoding="utf-8") as w:
                w.write("# more\n")
            return data

    def writer_between(path, what="file"):
        fh = real(path, what)
        return WrittenWhileRead(fh) if Path(path) == victim else fh

    monkeypatch.setattr(files_mod, "open_regular", writer_between)
    out = tmp_path / "b.tar.gz"
    code, _, err = cli(capsys, "backup", "--out", str(out), "--pipeline", "bm25")
    assert code == 2 and "ferry-dawn.yaml: changed while it was read (3 tries)" in err
    assert not out.exists()


def test_a_sparse_member_is_refused_before_a_byte_is_written(archive, tmp_path, capsys):
    """A sparse member's holes are zeros the archive does not hold: a few kilobytes could
    declare gigabytes. Refused by its header."""
    sparse = tarfile.TarInfo("fixtures/tidewell.yaml")
    sparse.type = tarfile.GNUTYPE_SPARSE
    crafted = _crafted(tmp_path, archive, sparse, b"holes")
    code, _, err = cli(capsys, "restore", str(crafted), "--into", str(tmp_path / "r"))
    assert code == 2 and "a sparse member; a garden backup holds none" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("layer", ["compressed", "tar"])
def test_restore_of_an_archive_damaged_anywhere_refuses_or_restores_it_whole(store, archive, tmp_path, capsys, layer):
    """Property: any byte of the archive (or of the tar inside its gzip layer) flipped, or
    the archive cut short, gives a refusal in one line with nothing left behind, or a
    restore whose every file is the original's."""
    import gzip

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    original = archive.read_bytes()
    plain = gzip.decompress(original)
    expected = {info.name: data for info, data in members(archive) if info.name not in (MANIFEST, MANIFEST_HASH)}
    runs = iter(range(10**6))

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(where=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255), cut=st.booleans())
    def damaged(where, flip, cut):
        data = bytearray(original if layer == "compressed" else plain)
        at = int(where * len(data))
        if cut:
            del data[at:]
        else:
            data[at] ^= flip
        n = next(runs)
        path = tmp_path / f"damaged-{n}.tar.gz"
        path.write_bytes(bytes(data) if layer == "compressed" else gzip.compress(bytes(data), mtime=0))
        into = tmp_path / f"into-{n}"
        code, _, err = cli(capsys, "restore", str(path), "--into", str(into))
        assert "Traceback" not in err
        if code == 0:
            got = {str(p.relative_to(into)): p.read_bytes() for p in into.rglob("*") if p.is_file()}
            assert {k: v for k, v in got.items() if k in expected} == expected
        else:
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert not into.exists() and not leftovers(tmp_path)

    damaged()


def test_judgments_and_generated_cases_are_durable_and_come_back(store, tmp_path, capsys):
    """Everything a person made travels: a person's verdicts in judgments/ and the cases
    `garden generate` wrote in cases/ are archived, restored and (the cases) rerun by the
    drill, as backup, restore, doctor and the docs all say, reading one definition."""
    from garden.evaluation.judgments import Judgments
    from garden.formats.layout import DURABLE_FOLDERS

    assert set(DURABLE_FOLDERS) >= {"fixtures", "regression", "challenge", "cases", "judgments"}
    code, out, err = cli(capsys, "generate", "seedbank", "--records", "200")
    assert code == 0, err
    assert out.splitlines()[-1] == "next: garden contrast cases/seedbank"
    generated = sorted(p.relative_to(store).as_posix() for p in (store / "cases" / "seedbank").glob("*.yaml"))
    assert generated
    judged = Judgments(store / "judgments" / "trace-2031-01-01.qrels")
    judged.set_grade("q-000000000001", "log.0303", 2)
    judged.set_question("q-000000000001", {"story": "tidewell", "query": "When did the ferry leave?",
                                           "as_of": "2030-03-05", "case": None}, verdict="answer")
    path = tmp_path / "with-judgments.tar.gz"
    code, out, err = cli(capsys, "backup", "--out", str(path), "--pipeline", "bm25", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["folders"]["judgments"] == 2 and report["folders"]["cases"] == len(generated)
    names = {info.name for info, _ in members(path)}
    assert {"judgments/trace-2031-01-01.qrels", "judgments/trace-2031-01-01.questions.jsonl", *generated} <= names
    into = tmp_path / "restored"
    code, out, err = cli(capsys, "restore", str(path), "--into", str(into), "--verify")
    assert code == 0, out + err
    for name in sorted(names - {MANIFEST, MANIFEST_HASH}):
        assert (into / name).read_bytes() == (store / name).read_bytes(), name
    assert Judgments.load(into / "judgments" / "trace-2031-01-01.qrels").verdict("q-000000000001") == "answer"
    # the drill reran the generated cases too, from their restored folder
    for case in generated:
        assert f"match {case}: passed, same answers" in out or f"match {case}: failed, same answers" in out
    code, out, _ = cli(capsys, "doctor", "--root", str(into))
    assert code == 0 and "cases/, judgments/" in out.splitlines()[-1]
