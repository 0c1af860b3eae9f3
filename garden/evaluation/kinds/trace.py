"""A trace (a `.jsonl` file, or a folder of `trace-YYYY-MM-DD.jsonl` files): its distinct
questions, judged by their cases or a person's grades (garden/evaluation/replay.py)."""
from __future__ import annotations

from pathlib import Path

from garden.evaluation.kinds.kind import Kind, Options
from garden.evaluation.replay import compare_replays, replays_from_trace, story_measures


def compare(path: Path, pipelines: list[str], baseline: str | None, plot=None, metrics=None, trec_dir=None,
            trace_source=None, judgments=None, since=None, until=None):
    from garden.evaluation.judgments import Judgments

    measures = story_measures(metrics)
    adjudicated = Judgments.load(judgments, must_exist=True) if judgments is not None else None
    questions = replays_from_trace(path, trace_source, adjudicated, since, until)
    return compare_replays(questions.replays, pipelines, baseline, str(path), measures, trec_dir, plot,
                           trace=questions)


KIND = Kind("trace", "trace", compare,
            options=(Options(("trace_source", "since", "until"), "select events of traces"),
                     Options(("judgments",), "grades a trace's questions (`garden judge`)")))
