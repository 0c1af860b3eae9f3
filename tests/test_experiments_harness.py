"""The experiments' harness (experiments/harness): the benchmark options, the folds and the
choose-then-hold-out protocol, the one percentile, the interleaved rounds and the stamp
every saved result carries."""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from experiments.harness.benchmarks import DEFAULTS, arguments, at_least_one
from experiments.harness.folds import GROUPS, choose_then_hold_out, deal, folds_of, hold_out_questions
from experiments.harness.results import commit, cpu_facts, write_json
from experiments.harness.timing import interleaved, percentile, query_rounds, spread, timed
from garden.evaluation.stores import Conversation, Question

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"


def test_a_missing_benchmark_is_refused_in_one_line_before_anything_is_read(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    with pytest.raises(SystemExit) as stopped:
        arguments(argparse.ArgumentParser(), ("locomo", "longmemeval"), ["--locomo", str(missing),
                                                                          "--longmemeval", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and err[-1].endswith(f"--locomo: no data at {missing}")
    assert "Traceback" not in "".join(err)


def test_the_benchmark_options_default_to_the_shared_data_and_may_be_left_out_where_allowed(tmp_path):
    parser = argparse.ArgumentParser()
    args = arguments(parser, ("vaswani", "longmemeval"), ["--vaswani", str(tmp_path), "--longmemeval", "none"],
                     optional=("longmemeval",), reuse="read again")
    assert args.vaswani == str(tmp_path) and args.longmemeval == "none" and not args.reuse
    assert DEFAULTS["locomo"] == ROOT.parent / "shared" / "data" / "locomo"
    # `--reuse` reads saved rows: the benchmark is not read, so its absence is no error
    again = arguments(argparse.ArgumentParser(), ("locomo",), ["--locomo", str(tmp_path / "gone"), "--reuse"],
                      reuse="read again")
    assert again.reuse and again.out.endswith(str(Path("experiments") / "out"))
    # `none` is refused where the benchmark is required: it names a path that does not exist
    with pytest.raises(SystemExit):
        arguments(argparse.ArgumentParser(), ("locomo",), ["--locomo", "none"])


def test_a_count_below_one_is_refused_naming_what_it_counts():
    parse = at_least_one("seeds: a whole number, at least 1")
    assert parse("3") == 3
    for bad in ("0", "-2", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=r"seeds: a whole number, at least 1, got"):
            parse(bad)


def test_the_percentile_is_the_linear_one_everywhere():
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(values, 50) == 30.0
    assert percentile(values, 95) == pytest.approx(48.0)        # 40 + 0.8 (50 - 40): between the closest ranks
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5          # the median of an even count
    assert spread(values) == {"p50": 30.0, "p95": pytest.approx(48.0)}
    rng = np.random.default_rng(1)
    sample = list(rng.exponential(size=101))
    assert percentile(sample, 95) == pytest.approx(float(np.percentile(sample, 95)))
    # the nearest rank, which two experiments once used, differs on the same values
    nearest = sorted(values)[round(0.95 * (len(values) - 1))]
    assert nearest == 50.0 != percentile(values, 95)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_rounds_are_interleaved_subject_by_subject_on_each_item():
    seen = []
    got = interleaved(2, ["q1", "q2"], ["reference", "other"], lambda s, item: seen.append((s, item)) or len(seen))
    assert seen == [("reference", "q1"), ("other", "q1"), ("reference", "q2"), ("other", "q2")] * 2
    assert got == {"reference": [1, 3, 5, 7], "other": [2, 4, 6, 8]}
    seconds, value = timed(lambda: "done")
    assert value == "done" and 0.0 <= seconds < 1.0


def test_query_rounds_time_each_pipeline_and_collect_its_stages():
    class Outcome:
        def __init__(self, ms):
            self.timings_ms = {"triage": ms, "pack": 2 * ms}

    class Pipeline:
        def __init__(self, ms):
            self.ms, self.asked = ms, []

        def run(self, spec):
            self.asked.append(spec)
            return Outcome(self.ms)

    pipelines = {"default": Pipeline(1.0), "bm25s": Pipeline(3.0)}
    totals, stages = query_rounds(3, ["a", "b"], pipelines)
    assert pipelines["default"].asked == ["a", "b"] * 3 == pipelines["bm25s"].asked
    assert [len(v) for v in totals.values()] == [6, 6] and all(ms >= 0 for v in totals.values() for ms in v)
    assert stages["bm25s"] == {"triage": [3.0] * 6, "pack": [6.0] * 6}


def _conversation(name: str, questions: list[tuple[str, str, list[str]]]) -> Conversation:
    from garden.models import Record, Story

    story = Story(story=name, project="harness", records=[Record(id="t1", kind="source", text="The kiln cracked.",
                                              at=dt.date(2024, 3, 1))])
    return Conversation(story, [Question(qid, "What cracked?", category, evidence, dt.date(2024, 3, 2))
                                for qid, category, evidence in questions])


def test_the_folds_are_conversations_and_longmemeval_questions_dealt_by_type_then_id():
    locomo = [_conversation("conv-a", [("conv-a/1", "1 single-hop", ["t1"]), ("conv-a/2", "5 adversarial", [])]),
              _conversation("conv-b", [("conv-b/1", "2 multi-hop", ["t1"])])]
    assert folds_of("locomo", locomo) == {"conv-a/1": "conv-a", "conv-b/1": "conv-b"}   # judged questions only
    types = ["temporal", "multi-session"] * 8
    haystacks = [_conversation(f"h{i}", [(f"q{i:02d}", t, ["t1"])]) for i, t in enumerate(types)]
    folds = folds_of("longmemeval", haystacks)
    ordered = sorted((t, f"q{i:02d}") for i, t in enumerate(types))
    assert [folds[q] for _, q in ordered] == [f"longmemeval-group-{n % GROUPS + 1}" for n in range(16)]
    assert {folds[q] for t, q in ordered if t == "temporal"} == {f"longmemeval-group-{k}" for k in range(1, 8)}
    assert deal("cab", key=str, groups=2) == [("a", 0), ("b", 1), ("c", 0)]


def test_each_fold_is_scored_by_a_choice_made_without_it():
    seen = []

    def choose(training):
        seen.append(list(training))
        return "+".join(training)
    assert choose_then_hold_out(["b", "a", "c"], choose) == [("b", "a+c"), ("a", "b+c"), ("c", "b+a")]
    assert seen == [["a", "c"], ["b", "c"], ["b", "a"]]          # the order given, the held fold never among them
    folds = {"locomo": {"x1": "fx", "x2": "fy"}, "longmemeval": {"y1": "g1", "y2": "fx"}}
    chosen, held = hold_out_questions(folds, lambda train: sorted(q for qs in train.values() for q in qs))
    assert [fold for fold, _ in chosen] == ["fx", "fy", "g1"]
    assert held["locomo"]["x1"] == ["x2", "y1"] == held["longmemeval"]["y2"]
    assert all(q not in held[b][q] for b in held for q in held[b])


def test_a_saved_result_names_its_commit_and_machine(tmp_path):
    path = write_json(tmp_path / "deep" / "figures.json", {"p50_ms": 4.2})
    saved = json.loads(path.read_text())
    assert saved["p50_ms"] == 4.2
    run = saved["run"]
    assert run["commit"] == commit() and run["commit"] != "unknown"
    assert run["machine"]["cores"] >= 1 and run["machine"]["usable_cores"] >= 1 and run["machine"]["cpu"]
    # a result shown again keeps the stamp of the run that measured it
    again = json.loads(write_json(tmp_path / "again.json", saved).read_text())
    assert again["run"] == run
    facts = cpu_facts("processor : 0\nmodel name : AMD EPYC 7B13\nflags : fpu sse4_2 avx avx2 fma\n"
                      "processor : 1\nmodel name : other\nflags : avx512f\n")
    assert facts == {"cpu": "AMD EPYC 7B13", "flags": ["sse4_2", "avx", "fma", "avx2"]}


def _violations(path: Path) -> list[str]:
    """What `path` imports that an experiment must not: another experiment, or a name (or a
    module) the garden keeps private; lazy imports inside functions counted too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if (parts[0] == "experiments" and parts[1:2] != ["harness"]) or \
                    (parts[0] == "garden" and any(p.startswith("_") and p != "__future__" for p in parts)):
                found.append(name)
    return found


def test_no_experiment_imports_another_or_a_private_name_of_the_garden(tmp_path):
    scripts = sorted(EXPERIMENTS.glob("*.py")) + sorted((EXPERIMENTS / "harness").glob("*.py"))
    assert len(scripts) > 20
    assert {s.name: _violations(s) for s in scripts if _violations(s)} == {}
    planted = tmp_path / "planted.py"
    planted.write_text("import json\nfrom experiments.harness.folds import deal\n"
                       "def f():\n    from experiments.scale import story_at\n"
                       "    from garden.retrievers._encoders import load_encoder\n    import garden._files\n")
    assert _violations(planted) == ["experiments.scale.story_at", "garden.retrievers._encoders.load_encoder",
                                    "garden._files"]
