"""The experiments run; their figures are the docs', not assertions here."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiments.standout_sweep import plot, sweep

ROOT = Path(__file__).resolve().parents[1]


def test_standout_sweep_shows_the_silent_store_flip(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    rows = sweep([str(ROOT / "regression" / "silent-store.yaml")], values=[1.0, 1.4])
    off, on = rows
    assert off["silent_kept"] < on["silent_kept"] == on["silent_total"]
    assert off["items_per_packet"] > on["items_per_packet"]
    png = plot(rows, tmp_path / "sweep.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_sweep_takes_any_setting_and_pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    case = [str(ROOT / "regression" / "silent-store.yaml")]
    low, shipped = sweep(case, values=[-10.0, 0.45], setting="answer_at")
    assert low["value"] == -10.0 and low["silent_kept"] < shipped["silent_kept"] == shipped["silent_total"]
    old = sweep(case, values=[1.4], pipeline_name="default-decide-fill")[0]
    assert old["pipeline"] == "default-decide-fill" and old["silent_kept"] == old["silent_total"]


def test_the_speed_experiments_fictional_file_is_in_the_released_schema(tmp_path):
    """The S-shaped file the LongMemEval speed run times must be one the importer accepts
    as released, with shared sessions and abstention questions, or the timing means nothing."""
    from experiments.longmemeval_speed import write_file
    from garden.formats.longmemeval import import_longmemeval

    path = tmp_path / "longmemeval_synthetic_s.json"
    shape = write_file(path, questions=12, sessions=6)
    assert shape["questions"] == 12 and shape["slots"] == 12 * 6
    report = import_longmemeval(path, tmp_path / "out")
    assert report.questions == 12 and report.abstention >= 1
    assert report.sessions < report.slots            # pool sessions shared between haystacks
    assert report.evidence_turns == 12 - report.abstention


def test_the_weights_experiment_refuses_a_bad_shard_in_one_line(capsys):
    import pytest

    from experiments.locomo_weights import main, parse_shard

    assert parse_shard("1/2") == (1, 2)
    for bad in ("2/2", "x/2", "1", "-1/3"):
        with pytest.raises(SystemExit) as exc:
            main([f"--shard={bad}", "--locomo", "/nonexistent"])
        assert exc.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error: argument --shard" in error and bad in error  # before any data is read


def test_the_passage_experiment_keeps_a_setting_only_when_neither_benchmark_loses():
    from experiments.passages import OFF, choose, holds, name

    assert holds("Fire to cone 6, then hold.", "cone 6") and not holds("Fire to cone 60.", "cone 6")
    assert holds("the shop is called Nostalgia.", "Nostalgia.") and holds("It took 14  days", "14 days")

    def row(bench, off, **settings):
        figures = {OFF: off, **{k.replace("_", "/"): v for k, v in settings.items()}}
        return {"bench": bench, "settings": {s: {"covered": c, "answer": a} for s, (c, a) in figures.items()}}

    narrow, wide = name((300, 300)), name((900, 900))
    assert (narrow, wide) == ("300/300", "900/900")
    helps_both = [row("locomo", (0.5, 1.0), **{"300_300": (0.6, 1.0), "900_900": (0.55, 1.0)}),
                  row("longmemeval", (0.5, 0.0), **{"300_300": (0.7, 0.0), "900_900": (0.5, 0.0)})]
    rows = [{**r, "settings": {**{s: {"covered": 0.5, "answer": None} for s in
                                 ("300/600", "450/450", "450/900", "600/600", "600/1200", "900/1800")},
                               **r["settings"]}} for r in helps_both]
    assert choose(rows) == narrow
    # the answer lost on one benchmark makes the better-covering setting ineligible
    rows[0]["settings"][narrow]["answer"] = 0.0
    assert choose(rows) == wide
    # coverage lost on one benchmark too: nothing is eligible but no passages
    rows[1]["settings"][wide]["covered"] = 0.4
    assert choose(rows) == OFF


def test_the_spread_study_counts_identical_vectors_and_measures_the_rest():
    from experiments.encoder_spread import difference

    rng = np.random.default_rng(0)
    native = rng.normal(size=(4, 8)).astype(np.float32)
    native /= np.linalg.norm(native, axis=1, keepdims=True)
    other = native.copy()
    other[1] = -native[1]   # one vector turned round: 1 - cosine of 2
    got = difference(native, other)
    assert got["identical"] == 0.75 and got["vectors"] == 4
    assert got["one_minus_cos_max"] == pytest.approx(2.0, abs=1e-6)
    assert got["one_minus_cos_median"] == pytest.approx(0.0, abs=1e-6)   # float32 rounding of a unit norm


def test_the_spread_study_ranks_by_cosine_ties_by_id():
    from experiments.encoder_spread import ranked

    docs = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    run = ranked(np.array([[1.0, 0.0]], dtype=np.float32), docs, ["q"], ["d9", "d10", "d2"])
    assert [d for d, _ in run["q"]] == ["d10", "d9", "d2"]   # the tie by id, as strings


def test_the_gate_threshold_rule_answers_first_then_refuses():
    import math

    from experiments.harness.gate import threshold_rule

    # every answerable question answered and every negative refused: just above the best negative
    at = threshold_rule({"a": ([3.0, 2.0, 1.0], [0.5, 0.2])})
    assert 0.5 < at <= math.nextafter(0.5, math.inf)
    # where refusing would leave less than 0.91 answered, the answering floor wins
    assert threshold_rule({"a": ([3.0, 2.0, 0.1], [0.5, 0.2])}) == 0.1
    # refuse-first drops the floor; benchmarks each keep their own cap
    assert threshold_rule({"a": ([3.0, 2.0, 0.1], [0.5, 0.2])}, "refuse-first") > 0.5
    assert threshold_rule({"a": ([3.0], [0.5]), "b": ([3.0], [0.9])}, "refuse-first") > 0.9


def test_the_development_subset_is_every_eighth_by_type_then_id(tmp_path):
    import json

    from experiments.harness.benchmarks import write_development_subset

    questions = [{"question_type": t, "question_id": f"q{i:02d}"} for i, t in
                 enumerate(["temporal", "multi-session"] * 10)]
    source = tmp_path / "sample.json"
    source.write_text(json.dumps(questions), encoding="utf-8")
    kept = json.loads(write_development_subset(source, tmp_path / "subset.json").read_text(encoding="utf-8"))
    ordered = sorted(questions, key=lambda q: (q["question_type"], q["question_id"]))
    assert kept == ordered[::8] and len(kept) == 3
    assert json.loads(write_development_subset(source, tmp_path / "all.json", every=1).read_text()) == ordered


def test_raw_chat_logs_keep_the_turns_and_leave_out_what_was_generated_from_them(tmp_path):
    import json

    from experiments.harness.chats import raw_chat_logs

    source, dest = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    dest.mkdir()
    fictional = {"speaker_a": "Ilse", "speaker_b": "Tomas", "session_1_date_time": "9:10 am on 3 March, 2024",
                 "session_1": [{"speaker": "Ilse", "dia_id": "D1:1", "text": "The lamp cracked."}],
                 "session_1_observation": {"Ilse": [["Ilse's lamp cracked.", "D1:1"]]},
                 "session_1_summary": "Ilse's lamp cracked.", "qa": []}
    (source / "conv-1.json").write_text(json.dumps({"conversation": fictional, "observation": {}, "qa": []}))
    (source / "conv-2.json").write_text(json.dumps(fictional))
    raw_chat_logs(source, dest)
    nested, flat = (json.loads((dest / f"conv-{n}.json").read_text()) for n in (1, 2))
    for kept in (nested["conversation"], flat):
        assert kept["session_1"] == fictional["session_1"] and kept["session_1_date_time"]
        assert not any(k.endswith(("_observation", "_summary")) for k in kept)
    assert "observation" not in nested and "qa" in nested


def test_the_store_gate_protocol_reads_each_store_against_its_own_level():
    """Three kinds of store whose supports sit on scales 2 apart, each store's reference on
    its own scale: one threshold cannot serve the three, a level read off the reference can."""
    from experiments.store_gate import BOTH, Table, held_out

    rng = np.random.default_rng(0)

    def parts(held):   # a support that moves with `held` alone
        return [[1.0, float(h), 1.0, 1.0] for h in held]

    rows = []
    for kind, shift in (("locomo", 0.0), ("locomo-raw", -2.0), ("longmemeval", -1.0)):
        for n in range(4):
            questions = [{"qid": f"{kind}{n}/{i}", "fold": f"fold-{n}", "answerable": i < 40, "core": i < 40,
                          "negative": None if i < 40 else "foreign", "x": p, "ratio": 1.0, "covered": 1.0,
                          "precision": 1.0, "bm25s_covered": 0.5, "bm25s_precision": 0.5}
                         for i, p in enumerate(parts(np.r_[rng.normal(2 + shift, 0.5, 40),
                                                           rng.normal(shift, 0.5, 40)]))]
            rows.append({"kind": kind, "store": f"{kind}-{n}", "questions": questions, "seconds": 0.0,
                         "known": parts(rng.normal(2 + shift, 0.5, 100)),
                         "foreign": parts(rng.normal(shift, 0.5, 200))})
    t = Table(rows)
    one = held_out(t, {"weights": "fit", "grid": [(0.0, 0.0)], "fit_on": BOTH["fit_on"]})["figures"]
    own = held_out(t, BOTH)["figures"]
    worst = {name: min(f["answered"] - f["negatives answered"] for f in got.values())
             for name, got in (("one", one), ("own", own))}
    assert worst["one"] < 0.2 and worst["own"] > 0.7


def test_the_sitting_experiment_chooses_only_what_costs_neither_benchmark():
    """experiments/session_ranking.py's rule: a variant that helps one benchmark and costs
    the other is not chosen (it is, with every variant eligible); one that helps both is."""
    from experiments.session_ranking import choose, pooled

    folds = {"a": {"a1": "fa", "a2": "fa", "a3": "fb"}, "b": {"b1": "fc", "b2": "fc", "b3": "fd"}}

    def figures(a: float, b: float) -> dict:
        return {"a": {m: {q: a for q in folds["a"]} for m in ("nDCG@10", "Success@5")},
                "b": {m: {q: b for q in folds["b"]} for m in ("nDCG@10", "Success@5")}}
    today, lopsided, both = figures(0.5, 0.5), figures(0.9, 0.45), figures(0.55, 0.55)
    names = ["today", "lopsided", "both"]
    chosen, held = choose([today, lopsided, both], folds, names)
    assert {c["chosen"] for c in chosen} == {"both"} and set(held["a"].values()) == {2}
    assert {c["chosen"] for c in choose([today, lopsided, both], folds, names, rule="best")[0]} == {"lopsided"}
    assert {c["chosen"] for c in choose([today, lopsided], folds, names[:2])[0]} == {"today"}
    assert pooled([3.0, 2.0, 1.0, 0.5], "sum3") == 6.0 and pooled([3.0, 1.0], "mean3") == 2.0
    assert pooled([3.0, 2.0], "max") == 3.0 and 3.0 < pooled([3.0, 2.0], "lse0.05") < 3.0 + 1e-6


def test_the_messaging_form_sends_a_turn_as_messages_and_its_evidence_with_the_messages_that_hold_it(tmp_path):
    """A turn is cut at its sentence breaks, a piece too short to send alone rides with its
    neighbour, a photo is a message of its own; the evidence moves to the messages sharing
    a content word with the answer, and a turn none of whose messages does keeps them all."""
    import json

    from experiments.harness.chats import messaging_form

    source, dest = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    dest.mkdir()
    fictional = {"speaker_a": "Ilse", "speaker_b": "Tomas", "session_1_date_time": "9:10 am on 3 March, 2024",
                 "session_1": [
                     {"speaker": "Tomas", "dia_id": "D1:1", "text": "How was the weekend up at the lake cabin?"},
                     {"speaker": "Ilse", "dia_id": "D1:2",
                      "text": "Wow. It was quiet and cold all weekend long up there. We caught three perch off the "
                              "jetty on Sunday morning before breakfast.",
                      "blip_caption": "a photo of a fish on a wooden jetty"},
                     {"speaker": "Tomas", "dia_id": "D1:3", "text": "Sounds perfect for a slow weekend away."}],
                 "session_1_observation": {"Ilse": [["Ilse caught perch.", "D1:2"]]},
                 "qa": [{"question": "What did Ilse catch at the lake?", "answer": "three perch",
                         "evidence": ["D1:2"], "category": 4},
                        {"question": "Where did Ilse stay?", "answer": "a cabin", "evidence": ["D1:3"],
                         "category": 4}]}
    (source / "conv-1.json").write_text(json.dumps(fictional))
    messaging_form(source, dest)
    made = json.loads((dest / "conv-1.json").read_text())
    sent = made["session_1"]
    assert [m["text"] for m in sent] == [
        "How was the weekend up at the lake cabin?",
        "Wow. It was quiet and cold all weekend long up there.",
        "We caught three perch off the jetty on Sunday morning before breakfast.",
        "", "Sounds perfect for a slow weekend away."]
    assert [m["dia_id"] for m in sent] == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"]
    assert sent[3]["blip_caption"] == "a photo of a fish on a wooden jetty" and sent[3]["speaker"] == "Ilse"
    assert made["qa"][0]["evidence"] == ["D1:3"]       # "perch": only the message that says it
    assert made["qa"][1]["evidence"] == ["D1:5"]       # no shared word: the turn's one message
    assert "session_1_observation" not in made


def test_the_shape_of_a_chat_counts_bursts_and_replies_to_a_question():
    from experiments.harness.chats import shape
    from garden.evaluation.stores import Conversation, Question
    from garden.models import Story

    said = [("s1", "tomas", "Tomas: Did the ferry run today?"), ("s1", "ilse", "Ilse: Only the morning one"),
            ("s1", "ilse", "Ilse: the gale stopped the rest of the day"), ("s2", "ilse", "Ilse: Home now.")]
    story = Story.model_validate({
        "story": "harbour", "project": "harbour", "entities": {"ilse": {"name": "Ilse"}, "tomas": {"name": "Tomas"}},
        "records": [{"id": f"m{i}", "kind": "source", "at": "2031-05-0" + ("1" if s == "s1" else "2"),
                     "title": s, "speaker": who, "text": text} for i, (s, who, text) in enumerate(said)]})
    got = shape([Conversation(story, [Question("harbour/q1", "q", "4", ["m2"], None)])])
    assert got["bursts"] == 3 and got["median burst"] == 1 and got["share of bursts of 2+"] == round(1 / 3, 3)
    assert got["evidence replying to a question"] == 1.0 and got["of those, no word of the question"] == 1.0
    assert got["median words of evidence"] == 8
