"""What a source is (garden/formats/sources.py): each kind by its own markers; a folder
carrying two kinds' markers is refused naming both, never read as whichever was tried
first (a BEIR collection holding a stray .json file was once read as LoCoMo)."""
from __future__ import annotations

import gzip
import json

import pytest

from garden.errors import GardenError
from garden.evaluation.kinds.registry import compare_source
from garden.formats.sources import source_kind


def _beir(folder):
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "tide tables"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "tide"}\n', encoding="utf-8")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    return folder


def test_each_kind_by_its_markers(tmp_path):
    (tmp_path / "t.jsonl").write_text("", encoding="utf-8")
    assert source_kind(tmp_path / "t.jsonl") == "trace"
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "trace-2031-05-02.jsonl").write_text("", encoding="utf-8")
    assert source_kind(traces) == "trace"
    (tmp_path / "conv.json").write_text("[]", encoding="utf-8")
    assert source_kind(tmp_path / "conv.json") == "locomo"
    (tmp_path / "data.json").write_text(json.dumps([{"question_id": "q", "haystack_session_ids": []}]),
                                        encoding="utf-8")
    assert source_kind(tmp_path / "data.json") == "longmemeval"
    (tmp_path / "any.json.gz").write_bytes(gzip.compress(b"[]"))
    assert source_kind(tmp_path / "any.json.gz") == "longmemeval"
    assert source_kind(_beir(tmp_path / "beir")) == "collection"
    (tmp_path / "trec" / "corpus").mkdir(parents=True)
    assert source_kind(tmp_path / "trec") == "collection"
    (tmp_path / "case.yaml").write_text("id: x\n", encoding="utf-8")
    assert source_kind(tmp_path / "case.yaml") == "cases"
    for kind, story in (("locomo", "locomo-conv-1.yaml"), ("longmemeval", "longmemeval-q1.jsonl")):
        imported = tmp_path / f"imported-{kind}"
        (imported / "fixtures").mkdir(parents=True)
        (imported / "cases" / "one").mkdir(parents=True)
        (imported / "fixtures" / story).write_text("", encoding="utf-8")
        (imported / "cases" / "one" / "q.yaml").write_text("", encoding="utf-8")
        assert source_kind(imported) == kind, "an imported store set is not a case folder"


def test_a_folder_with_two_kinds_of_markers_is_refused_naming_both(tmp_path):
    beir = _beir(tmp_path / "beir")
    (beir / "notes.json").write_text("{}", encoding="utf-8")
    with pytest.raises(GardenError) as refused:
        source_kind(beir)
    message = str(refused.value)
    assert "collection (corpus.jsonl (BEIR))" in message and "locomo (.json files)" in message
    # compare refuses it before any pipeline runs, in one line
    with pytest.raises(GardenError, match="more than one kind of source"):
        compare_source(str(beir), ["bm25"])


def test_a_path_with_no_marker_is_refused_saying_what_each_kind_needs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("tide", encoding="utf-8")
    for path in (tmp_path / "empty", tmp_path / "notes.txt"):
        with pytest.raises(GardenError, match="not a source the garden reads; it needs the markers of a trace"):
            source_kind(path)
    with pytest.raises(GardenError, match="no such collection folder"):
        source_kind(tmp_path / "nowhere")


def test_every_kind_the_markers_name_is_registered():
    from garden.evaluation.kinds.registry import kinds
    from garden.formats.sources import KINDS

    assert set(KINDS) <= set(kinds())
    assert all(kind.takes(option) for kind in kinds().values() for option in ("plot", "metrics", "trec_dir"))


@pytest.mark.parametrize("flags, needle", [
    (["--negatives-per-store", "3"], "--negatives-per-store and --negatives-seed size and seed the negatives "
                                     "LoCoMo builds; the cases kind does not take them"),
    (["--form", "raw"], "--form reads LoCoMo's chats raw or as messages"),
    (["--judgments", "x.qrels"], "--judgments grades a trace's questions"),
    (["--scoring", "longmemeval"], "--scoring is LongMemEval's own scoring"),
])
def test_an_option_a_kind_does_not_take_is_one_line_naming_the_kind(flags, needle, capsys, monkeypatch, tmp_path):
    from pathlib import Path

    from garden.cli import main

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    regression = str(Path(__file__).resolve().parents[1] / "regression")
    assert main(["compare", regression, "--pipelines", "bm25", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "the cases kind does not take" in err[0], err


def test_ablate_refuses_an_option_of_another_kind_before_running_anything(capsys, monkeypatch, tmp_path):
    from pathlib import Path

    from garden.cli import main

    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    regression = str(Path(__file__).resolve().parents[1] / "regression")
    assert main(["ablate", regression, "--stages", "decide", "--form", "raw"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--form reads LoCoMo's chats" in err[0] and "the cases kind does not take it" in err[0]
