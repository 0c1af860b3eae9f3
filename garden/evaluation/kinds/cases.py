"""Case files or a folder of them: each query judged by its case's expectations
(garden/evaluation/replay.py); `ablate` also says which cases each stage decides."""
from __future__ import annotations

from pathlib import Path

from garden.evaluation.kinds.kind import Kind
from garden.evaluation.replay import compare_replays, replays_from_cases, story_measures


def compare(path: Path, pipelines: list[str], baseline: str | None, plot=None, metrics=None, trec_dir=None):
    measures = story_measures(metrics)
    files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
    return compare_replays(replays_from_cases(files), pipelines, baseline, str(path), measures, trec_dir, plot)


def case_verdicts(path: Path, pipelines: list[str]) -> dict[str, dict[str, bool]]:
    """case id -> pipeline -> whether the case passes under it."""
    from garden._terminal import Progress, counted
    from garden.evaluation.runner import load_cases, run_case

    cases = load_cases([str(path)])
    bar, stories = Progress(f"ablate: {len(pipelines)} pipelines", total=len(cases), unit="cases"), {}
    return {case.id: {p: run_case(case, p, trace=False, stories=stories).passed for p in pipelines}
            for case in counted(cases, bar)}


KIND = Kind("cases", "cases", compare, case_verdicts=case_verdicts,
            declines={"negatives": "a case folder declares its own with `unanswerable: true`"})
