"""Fictional LongMemEval files in the released schema (Wu et al., ICLR 2025; MIT), shared by
the import and compare tests: a made-up potter, Ilse Marrow, talks with an assistant about
her studio and a trip to the made-up island of Varnholm. The files carry each quirk of the
real ones."""
from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "longmemeval"
SUBSET_PIPELINES = ["bm25s", "hybrid", "default"]


def stamp(y: int, m: int, d: int, hh: int = 10, mm: int = 0) -> str:
    """A date as the released files write it: "2023/05/30 (Tue) 23:40"."""
    return dt.datetime(y, m, d, hh, mm).strftime("%Y/%m/%d (%a) %H:%M")


def turn(role: str, content: str, has_answer: bool | None = None) -> dict:
    t = {"role": role, "content": content}
    if has_answer is not None:
        t["has_answer"] = has_answer
    return t


# A filler session shared by two haystacks, with a mixed-case id as the released
# sharegpt ones have, and a different date in each haystack.
SHARED_ID = "sharegpt_Clay9Xq_0"
SHARED = [turn("user", "Can you explain how a kick wheel differs from an electric wheel?"),
          turn("assistant", "A kick wheel is driven by a flywheel you push with your foot; an electric "
                            "wheel has a motor and a pedal for speed.")]


def fictional() -> list[dict]:
    """Four questions carrying the quirks: an abstention question, a shared session, an
    evidence turn said by the assistant, an evidence session with no marked turn, a turn
    marked false, an empty turn, and an unjudged question."""
    q1 = {
        "question_id": "pot_glaze_01",
        "question_type": "single-session-user",
        "question": "What glaze did I pick for the teapot?",
        "answer": "celadon",
        "question_date": stamp(2023, 5, 30, 23, 40),
        "haystack_session_ids": [SHARED_ID, "answer_pot_1"],
        "haystack_dates": [stamp(2023, 5, 2, 9, 15), stamp(2023, 5, 20, 2, 21)],
        "haystack_sessions": [
            SHARED,
            [turn("user", "I finished throwing the teapot at the Marrow studio today."),
             turn("assistant", "Congratulations! Which glaze are you thinking of?", False),
             turn("user", "I picked a pale celadon glaze for the teapot.", True),
             turn("assistant", "")],
        ],
        "answer_session_ids": ["answer_pot_1"],
    }
    q2 = {
        "question_id": "kiln_talk_02",
        "question_type": "single-session-assistant",
        "question": "What firing temperature did you suggest for my stoneware mugs?",
        "answer": 1220,
        "question_date": stamp(2023, 6, 12, 8, 5),
        "haystack_session_ids": ["answer_kiln_1", SHARED_ID],
        "haystack_dates": [stamp(2023, 6, 1, 19, 0), stamp(2023, 6, 3, 7, 30)],
        "haystack_sessions": [
            [turn("user", "My stoneware mugs keep coming out chalky."),
             turn("assistant", "Fire them to cone 6, about 1220 degrees Celsius, and hold for ten minutes.", True)],
            SHARED,
        ],
        "answer_session_ids": ["answer_kiln_1"],
    }
    q3 = {
        "question_id": "trip_ferry_03_abs",
        "question_type": "temporal-reasoning",
        "question": "How many days after the ferry ride did I visit the lighthouse on Varnholm?",
        "answer": "You did not mention visiting a lighthouse.",
        "question_date": stamp(2023, 7, 9, 12, 0),
        "haystack_session_ids": ["answer_trip_1"],
        "haystack_dates": [stamp(2023, 7, 1, 18, 45)],
        "haystack_sessions": [
            [turn("user", "I took the morning ferry to Varnholm and sketched the harbour."),
             turn("assistant", "That sounds lovely. Did you bring clay to the island?")],
        ],
        "answer_session_ids": ["answer_trip_1"],
    }
    q4 = {
        "question_id": "studio_rent_04",
        "question_type": "knowledge-update",
        "question": "How much is my studio rent now?",
        "answer": "It went up to 340 a month.",
        "question_date": stamp(2023, 8, 1, 9, 0),
        "haystack_session_ids": ["answer_studio_2", "ultrachat_55501"],
        "haystack_dates": [stamp(2023, 7, 20, 16, 10), stamp(2023, 7, 25, 11, 0)],
        "haystack_sessions": [
            [turn("user", "The landlord raised the studio rent to 340 a month."),
             turn("assistant", "That is a steep jump; have you asked about a shared lease?")],
            [turn("user", "Suggest three names for a small ceramics shop."),
             turn("assistant", "Kiln and Key, The Slip House, Marrow Ceramics.", True)],   # outside the evidence
        ],
        "answer_session_ids": ["answer_studio_2"],
    }
    return [q1, q2, q3, q4]


def write(path: Path, data, gz: bool = False) -> Path:
    raw = json.dumps(data).encode("utf-8")
    path.write_bytes(gzip.compress(raw, mtime=0) if gz else raw)
    return path


def renamed_import(folder: Path, out: Path, seed: int = 48) -> dict[str, str]:
    """A copy of `garden import longmemeval`'s output with every session renamed: each
    session's id (the part of a record id before its last dot) becomes a random name, the
    same in every haystack, in the stories and in the cases' evidence; the cases' `about`,
    which names the evidence sessions, says nothing. The records' texts and titles are kept,
    so nothing but the names changes. Returns old session -> new."""
    import random

    import yaml

    rng = random.Random(seed)
    names: dict[str, str] = {}

    def renamed(rid: str) -> str:
        session, _, n = rid.rpartition(".")
        if session not in names:
            names[session] = f"{rng.getrandbits(48):012x}"
        return f"{names[session]}.{n}"

    for story in sorted((folder / "fixtures").glob("longmemeval-*.jsonl")):
        lines = story.read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines[1:]]
        for record in records:
            record["id"] = renamed(record["id"])
        target = out / "fixtures" / story.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join([lines[0], *(json.dumps(r, ensure_ascii=False) for r in records)]) + "\n",
                          encoding="utf-8")
    for case in sorted((folder / "cases").glob("longmemeval-*/*.yaml")):
        data = yaml.safe_load(case.read_text(encoding="utf-8"))
        data["about"] = "a LongMemEval question, its sessions renamed"
        if "include" in data.get("expect", {}):
            data["expect"]["include"] = [renamed(rid) for rid in data["expect"]["include"]]
        target = out / "cases" / case.parent.name / case.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return names


def sample_subset(sample: Path, every: int, out: Path) -> Path:
    """A development sample's subset by the rule fixed before any figure was read: its
    questions sorted by type, then id, and every `every`-th taken from the first, written to
    `out` (a released file's layout). Skips the test where the read-only sample is absent."""
    import pytest

    if not sample.is_file():
        pytest.skip(f"the LongMemEval sample is not at {sample} (read-only shared data, not shipped)")
    with gzip.open(sample, "rt", encoding="utf-8") as fh:
        questions = json.load(fh)
    questions.sort(key=lambda q: (q["question_type"], q["question_id"]))
    return write(out, questions[::every])


def subset_report(source: Path, **kwargs) -> dict:
    """`garden compare` on a subset (or its import) under SUBSET_PIPELINES against bm25s, as
    JSON, with 2,000 permutations."""
    from garden.evaluation.longmemeval import compare_longmemeval

    return compare_longmemeval(source, SUBSET_PIPELINES, "bm25s", permutations=2000, **kwargs).to_json()


def renamed_report(subset: Path, root: Path) -> tuple[dict[str, str], dict]:
    """The subset imported under `root`, every session renamed (`renamed_import`), and
    compared again: (old session -> new, the report)."""
    from garden.formats.longmemeval import import_longmemeval

    import_longmemeval(subset, root / "imported")
    names = renamed_import(root / "imported", root / "renamed")
    return names, subset_report(root / "renamed")


def subset_fixtures(sample: Path, every: int, folder: str):
    """The module fixtures of a sample's pinned subset: `subset` (`sample_subset`, written
    under a temporary `folder`) and `report` (`subset_report` with the published figures
    beside it), each made once per module."""
    import pytest

    @pytest.fixture(scope="module")
    def subset(tmp_path_factory):
        return sample_subset(sample, every, tmp_path_factory.mktemp(folder) / "subset.json")

    @pytest.fixture(scope="module")
    def report(subset):
        return subset_report(subset, against="published")

    return subset, report
