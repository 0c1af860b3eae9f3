"""`garden import locomo`: LoCoMo conversations (Maharana et al., ACL 2024, "Evaluating
Very Long-Term Conversational Memory of LLM Agents"; data CC BY-NC 4.0) as stories and
cases that `garden check`, `query` and `run` accept as written.

The real conversations are read from ../shared/data/locomo and never copied into the
project; the quirks of the released annotations are reproduced in small crafted files.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from garden.cli import main
from garden.errors import GardenError
from garden.formats.locomo import import_locomo, parse_date_time, resolve_evidence
from filetree import tree

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"
needs_data = pytest.mark.skipif(not (DATA / "conv-30.json").is_file(),
                                reason=f"the LoCoMo data is not at {DATA} (read-only shared data, not shipped)")


def crafted() -> dict:
    """A two-session conversation carrying every quirk of the released evidence ids."""
    return {
        "speaker_a": "Ada Quill",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ada Quill", "dia_id": "D1:1", "text": "I planted tomatoes in the south bed."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Look at mine!", "img_url": ["http://x"],
             "blip_caption": "a photo of a greenhouse full of peppers", "query": "greenhouse"},
        ],
        "session_1_observation": {
            "Ada Quill": [["Ada planted tomatoes in the south bed.", "D1:1"]],
            "Bo": [["Bo grows peppers in a greenhouse.", ["D1:2"]]],
        },
        "session_1_summary": "Ada and Bo talked about their gardens.",
        "session_2_date_time": "10:05 am on 30 June, 2023",
        "session_2": [
            {"speaker": "Bo", "dia_id": "D2:1", "text": "The peppers turned red."},
            {"speaker": "Ada Quill", "dia_id": "D2:2", "text": "The tomatoes split in the rain."},
        ],
        "session_2_observation": {"Ada Quill": [["Ada's tomatoes split.", "D2:2, D2:1"]]},
        "session_2_summary": "Bo's peppers ripened and Ada's tomatoes split.",
        "session_9_date_time": "9:00 am on 1 July, 2023",   # a date without a session, as in conv-26
        "qa": [
            {"question": "What does Bo grow?", "answer": "peppers", "evidence": ["D1:2; D2:1"], "category": 4},
            {"question": "What split?", "answer": "tomatoes", "evidence": ["D02:02"], "category": 1},
            {"question": "Where did Ada plant?", "answer": "south bed", "evidence": ["D:1:1"], "category": 2},
            {"question": "What did Bo say?", "answer": "x", "evidence": ["D"], "category": 3},
            {"question": "Did Bo plant tomatoes?", "adversarial_answer": "yes", "evidence": ["D7:7", "D1:1"],
             "category": 5},
        ],
    }


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- units -----------------------------------------------------------------------------


def test_parse_date_time_reads_the_locomo_stamp():
    assert parse_date_time("1:56 pm on 8 May, 2023") == dt.date(2023, 5, 8)
    assert parse_date_time("10:37 am on 27 June, 2023") == dt.date(2023, 6, 27)
    assert parse_date_time("13:56 pm on 8 May, 2023") is None
    assert parse_date_time("1:56 pm on 31 February, 2023") is None
    assert parse_date_time("8 May 2023") is None
    assert parse_date_time(None) is None


def test_resolve_evidence_repairs_what_is_unambiguous_and_drops_the_rest():
    turns = {"d8.6", "d9.17", "d30.5", "d11.26"}
    ev = resolve_evidence(["D8:6; D9:17", "D30:05", "D:11:26", "D", "D4:36", 7, "D8:6"], turns)
    assert ev.ids == ["d8.6", "d9.17", "d30.5", "d11.26"]
    assert len(ev.repaired) == 4 and len(ev.dropped) == 3
    assert any("'D4:36'" in d and "names no turn" in d for d in ev.dropped)
    assert resolve_evidence("D8:6", turns).ids == ["d8.6"]          # an observation's bare string
    assert resolve_evidence("D8:6", turns).repaired == []


# --- the crafted conversation: every quirk -------------------------------------------------


def test_quirks_are_repaired_or_dropped_and_counted(home, capsys):
    src = write_json(home / "conv-7.json", crafted())
    assert main(["import", "locomo", str(src), "--out", "out"]) == 0
    printed = capsys.readouterr().out
    assert ("locomo-7: 4 turns, 3 observations, 2 summaries, 5 questions; "
            "evidence ids repaired 6, dropped 2") in printed
    story = yaml.safe_load((home / "out/fixtures/locomo-7.yaml").read_text())
    assert story["story"] == "locomo-7" and story["project"] == "locomo-7"
    assert story["entities"] == {"ada_quill": {"name": "Ada Quill", "aliases": ["Ada Quill"]},
                                 "bo": {"name": "Bo", "aliases": ["Bo"]}}
    records = {r["id"]: r for r in story["records"]}
    assert [r["id"] for r in story["records"]] == [
        "d1.1", "d1.2", "obs.s1.ada-quill.1", "obs.s1.bo.1", "summary.s1",
        "d2.1", "d2.2", "obs.s2.ada-quill.1", "summary.s2"]
    photo = records["d1.2"]
    assert photo["text"] == "Bo: Look at mine! [shared a photo: a photo of a greenhouse full of peppers]"
    assert photo["kind"] == "source" and photo["speaker"] == "bo" and "entities" not in photo
    assert photo["at"] == dt.date(2023, 5, 8) and "1:56 pm" in photo["title"]
    assert records["d2.2"]["at"] == dt.date(2023, 6, 30) and "10:05 am" in records["d2.2"]["title"]
    # an observation's evidence as a string, as a list, and as two ids in one string
    assert records["obs.s1.ada-quill.1"]["sources"] == ["d1.1"]
    assert records["obs.s1.bo.1"]["sources"] == ["d1.2"]
    assert records["obs.s2.ada-quill.1"]["sources"] == ["d2.2", "d2.1"]
    note = records["obs.s1.bo.1"]
    assert (note["kind"], note["fidelity"], note["entities"]) == ("note", "summary", ["bo"])
    view = records["summary.s2"]
    assert (view["kind"], view["fidelity"], view["sources"]) == ("view", "summary", ["d2.1", "d2.2"])

    cases = home / "out/cases/locomo-7"
    assert sorted(p.name for p in cases.iterdir()) == [f"q00{i}.yaml" for i in range(1, 6)]
    case = {p.stem: yaml.safe_load(p.read_text()) for p in cases.iterdir()}
    assert case["q001"]["expect"] == {"include": ["d1.2", "d2.1"]}     # "D1:2; D2:1"
    assert case["q002"]["expect"] == {"include": ["d2.2"]}             # "D02:02"
    assert case["q003"]["expect"] == {"include": ["d1.1"]}             # "D:1:1"
    assert "expect" not in case["q004"]                                 # "D": nothing left to judge
    assert case["q005"]["expect"] == {"include": ["d1.1"]}             # "D7:7" names no turn
    assert case["q001"]["story"] == "../../fixtures/locomo-7.yaml"
    assert case["q001"]["as_of"] == dt.date(2023, 6, 30)                        # the last session with turns
    assert case["q001"]["category"] == "locomo category 4 (single-hop)"
    assert case["q005"]["category"] == "locomo category 5 (adversarial)"
    assert "adversarial answer" in case["q005"]["about"] and "answer" not in case["q005"].get("expect", {})
    assert "LoCoMo" in case["q001"]["origin"]
    assert "dropped q004: 'D' (not a dia_id)" in printed
    assert "dropped q005: 'D7:7' (names no turn)" in printed


def test_import_is_deterministic(home):
    src = write_json(home / "conv-7.json", crafted())
    import_locomo(src, home / "a")
    import_locomo(src, home / "b")
    first = tree(home / "a")
    assert first and first == tree(home / "b")
    import_locomo(src, home / "a")             # a re-import over its own output: same bytes
    assert tree(home / "a") == first
    assert not any(p.name.startswith(".locomo-import") for p in (home / "a").iterdir())


def test_crafted_story_checks_and_its_cases_run(home, capsys):
    src = write_json(home / "conv-7.json", crafted())
    import_locomo(src, home)
    assert main(["check", "fixtures/locomo-7.yaml"]) == 0
    capsys.readouterr()
    assert main(["run", "cases/locomo-7", "--pipeline", "bm25s", "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert len(report["results"]) == 5
    assert all(r["suite"] == "cases" for r in report["results"])      # never a regression case


# --- bad input: one located line, exit 2, nothing written ------------------------------------


@pytest.mark.parametrize("content, needle", [
    ("{not json", ":1:2: not JSON"),
    (json.dumps([1, "two"]), "sample #0: must be an object"),
    (json.dumps({"speaker_a": "A", "speaker_b": "B", "qa": [],
                 "session_1_date_time": "1:56 pm on 8 May, 2023",
                 "session_1": [{"speaker": "A", "text": "hi"}]}),
     "session_1[0]: field dia_id: required field is missing"),
    (json.dumps({"speaker_a": "A", "speaker_b": "B", "qa": [],
                 "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}),
     "field session_1_date_time: required field is missing"),
    (json.dumps([{"sample_id": "conv-1", "qa": []}]), "sample #0: field conversation: required field is missing"),
])
def test_bad_input_exits_2_with_a_located_line_and_writes_nothing(home, capsys, content, needle):
    src = home / "conv-1.json"
    src.write_text(content, encoding="utf-8")
    assert main(["import", "locomo", str(src), "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert needle in err and str(src) in err
    assert not (home / "out").exists()


def test_one_bad_file_in_a_folder_writes_nothing_for_the_good_ones(home, capsys):
    folder = home / "in"
    folder.mkdir()
    write_json(folder / "conv-7.json", crafted())
    (folder / "conv-8.json").write_text("[1]", encoding="utf-8")
    (home / "out").mkdir()
    assert main(["import", "locomo", str(folder), "--out", "out"]) == 2
    assert "conv-8.json: sample #0" in capsys.readouterr().err
    assert list((home / "out").iterdir()) == []


def test_a_missing_path_is_bad_input(home):
    with pytest.raises(GardenError) as exc:
        import_locomo(home / "nowhere.json", home / "out")
    assert exc.value.status == 2 and "no such file or folder" in exc.value.messages[0]


# --- the real conversations -------------------------------------------------------------------


@needs_data
def test_both_layouts_give_the_same_bytes(home):
    samples = []
    for name in ("conv-26", "conv-30"):
        d = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        samples.append({
            "sample_id": name,
            "conversation": {k: v for k, v in d.items()
                             if k in ("speaker_a", "speaker_b") or k.startswith("session_")
                             and not k.endswith(("_observation", "_summary"))},
            "qa": d["qa"],
            "observation": {k: v for k, v in d.items() if k.endswith("_observation")},
            "session_summary": {k: v for k, v in d.items() if k.endswith("_summary")},
            "event_summary": {k: v for k, v in d.items() if k.startswith("events_session_")},
        })
    write_json(home / "locomo10.json", samples)
    nested = import_locomo(home / "locomo10.json", home / "nested")
    for name in ("conv-26", "conv-30"):
        import_locomo(DATA / f"{name}.json", home / "flat")
    assert [c.name for c in nested.conversations] == ["locomo-26", "locomo-30"]
    flat = tree(home / "flat")
    assert len(flat) == 2 + 199 + 105
    assert flat == tree(home / "nested")
    assert nested.conversations[0].turns == 419 and len(nested.conversations[0].cases) == 199


@needs_data
def test_real_conversation_checks_queries_and_runs(home, capsys):
    assert main(["import", "locomo", str(DATA / "conv-30.json"), "--out", "."]) == 0
    assert "locomo-30: 369 turns" in capsys.readouterr().out
    story = "fixtures/locomo-30.yaml"
    assert main(["check", story]) == 0
    capsys.readouterr()
    assert main(["query", story, "When did Jon lose his job as a banker?", "--pipeline", "bm25s", "--json"]) == 0
    packet = json.loads(capsys.readouterr().out)
    assert packet["decision"] == "retrieve" and packet["items"]
    case = home / "cases/locomo-30/q001.yaml"
    assert main(["run", str(case), "--pipeline", "bm25s", "--json"]) in (0, 1)
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["case"] == "q001" and result["category"] == "locomo category 2 (temporal)"


@needs_data
def test_real_repairs_are_counted(home):
    report = import_locomo(DATA / "conv-43.json", home / "out")
    conv = report.conversations[0]
    assert conv.repaired == ["q019: 'D:11:26' -> d11.26"] and conv.dropped == []
    case = yaml.safe_load((home / "out/cases/locomo-43/q019.yaml").read_text())
    assert "d11.26" in case["expect"]["include"]
