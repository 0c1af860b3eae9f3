"""Running queries and cases under a pipeline, the contrast matrix, and promotion."""
from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from garden._terminal import Progress, counted
from garden.formats.layout import CHALLENGE, REGRESSION, SUITES
from garden.pipelines.indexes import fresh_builds
from garden.text import shown
from garden.formats.cases import LoadedCase, Query, check, check_build_error, load_case, spec_for
from garden.errors import GardenError, StoryError
from garden.pipelines.traces import TraceEvent
from garden.derived.home import check_environment, derived_dir, retention_setting
from garden.pipelines import Outcome, Pipeline, check_pipeline, make_pipeline, split_structured
from garden.rerank.query import QuerySpec
from garden.rerank.stages import as_settings
from garden.retrievers import registered, spec_text
from garden.formats.stories import load_story
from garden.pipelines.traces import DEFAULT_RETENTION_DAYS, prune_traces, write_trace

class PruneOnce:
    """Old traces are pruned on a process's first trace write to each garden home: once is
    enough, and a process that writes to two homes (a test suite, a notebook) prunes each.
    Lives as long as the object; `reset()` forgets every home."""

    def __init__(self):
        self.homes: set[str] = set()

    def __call__(self) -> None:
        home = str(derived_dir())
        if home in self.homes:
            return
        # the environment is checked before the first trace is written, so a bad setting
        # stops the run at its first query, not after a pile of work (the cache's settings are
        # for the work that encodes, checked where it starts)
        check_environment(cache=False)
        prune_traces(dt.date.today(), retention_days())
        self.homes.add(home)

    def reset(self) -> None:
        self.homes.clear()


PRUNE_TRACES = PruneOnce()


def run_query(spec: QuerySpec, pipeline: "str | Pipeline" = "default", case: str | None = None, trace: bool = True,
              case_path: str | None = None) -> Outcome:
    """One query under a pipeline named (made here) or already made (a server's), written
    to the trace under the pipeline's name."""
    made = make_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    outcome = made.run(spec)
    if trace:
        record_trace(spec, made.name, outcome, case, case_path)
    return outcome


def record_trace(spec: QuerySpec, pipeline: str, outcome: Outcome, case: str | None,
                 case_path: str | None = None) -> None:
    PRUNE_TRACES()
    story_path = str(Path(spec.story_path).resolve()) if spec.story_path else None
    # built unchecked: every field is already of its type (the spec and the outcome were
    # validated as they were made), and checking the stages' thousands of numbers one by
    # one cost a millisecond a query; write_trace still refuses a number that is not finite
    write_trace(TraceEvent.model_construct(story=spec.story.name, story_path=story_path, query=spec.query,
                           as_of=spec.as_of, hints=spec.hints, budget=spec.budget,
                           include_private=spec.include_private, settings=as_settings(spec.settings),
                           session=spec.session, pipeline=pipeline, case=case, case_path=case_path,
                           stages=outcome.stages,
                           timings_ms=outcome.timings_ms, packet=outcome.packet))


def retention_days() -> int:
    """Days traces are kept: `GARDEN_TRACE_DAYS` (ASCII digits, 0 to 36500), else 14."""
    days = retention_setting()
    return DEFAULT_RETENTION_DAYS if days is None else days


@dataclass
class QueryResult:
    name: str | None
    passed: bool
    failures: list[str]
    fallback: bool = False
    packet: dict | None = None


@dataclass
class CaseResult:
    case: str
    suite: str
    pipeline: str
    path: str
    category: str | None
    main: QueryResult
    controls: list[QueryResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.main.passed and all(c.passed for c in self.controls)

    @property
    def fallbacks(self) -> int:
        return sum(q.fallback for q in [self.main, *self.controls])

    def to_json(self) -> dict:
        return {"case": self.case, "suite": self.suite, "pipeline": self.pipeline, "path": self.path,
                "category": self.category, "passed": self.passed, "failures": self.main.failures,
                "fallbacks": self.fallbacks,
                "controls": [{"name": c.name, "passed": c.passed, "failures": c.failures} for c in self.controls]}


def run_one(loaded: LoadedCase, q: Query, pipeline: str, trace: bool = True,
            stories: dict | None = None) -> QueryResult:
    """One query of a case. `stories` (path -> Story), when given, holds the stories a run
    of many cases has read: each read and checked once per run, not once per query."""
    try:
        story = stories.get(q.story_path) if stories is not None else None
        if story is None:
            story = load_story(q.story_path)
            if stories is not None:
                stories[q.story_path] = story
    except StoryError as exc:
        failures = check_build_error(q.expect, exc, q.story_path)
        return QueryResult(q.name, not failures, failures)
    spec = spec_for(q, story)
    outcome = run_query(spec, pipeline, case=loaded.id, trace=trace, case_path=str(loaded.path.resolve()))
    failures = check(q.expect, outcome.packet, story, spec.include_private)
    return QueryResult(q.name, not failures, failures, outcome.packet.fallback,
                       outcome.packet.model_dump(mode="json"))


def run_case(loaded: LoadedCase, pipeline: str = "default", trace: bool = True,
             stories: dict | None = None) -> CaseResult:
    main, *controls = [run_one(loaded, q, pipeline, trace, stories) for q in loaded.queries]
    return CaseResult(loaded.id, loaded.suite, pipeline, str(loaded.path), loaded.case.category, main, controls)


def collect_case_files(paths: list[str] | None) -> list[Path]:
    """Case files under each path (a file or a folder); default regression/ and challenge/."""
    if not paths:
        paths = [p for p in SUITES if Path(p).is_dir()]
        if not paths:
            raise GardenError("no regression/ or challenge/ folder here; name the cases to run")
    files: list[Path] = []
    missing: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob("*.yaml"))
        elif p.is_file():
            files.append(p)
        else:
            missing.append(f"{shown(str(p))}: no such case file or folder")
    if missing:
        raise GardenError(missing)
    return files


def load_cases(paths: list[str] | None) -> list[LoadedCase]:
    """Every case under `paths`, or one GardenError listing the problems of every bad
    case file, so a folder with two bad cases is fixed in one pass, not two."""
    loaded, problems = [], []
    for f in collect_case_files(paths):
        try:
            loaded.append(load_case(f))
        except GardenError as exc:
            problems += exc.messages
    if problems:
        raise GardenError(problems)
    return loaded


@dataclass
class RunReport:
    results: list[CaseResult]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def regression_failed(self) -> int:
        return sum(1 for r in self.results if r.suite == REGRESSION and not r.passed)

    @property
    def fallbacks(self) -> int:
        return sum(r.fallbacks for r in self.results)

    @property
    def queries(self) -> int:
        return sum(1 + len(r.controls) for r in self.results)

    def exit_code(self) -> int:
        return 1 if self.regression_failed else 0

    def to_json(self) -> dict:
        return {"results": [r.to_json() for r in self.results], "passed": self.passed, "failed": self.failed,
                "regression_failed": self.regression_failed,
                "triage_fallbacks": {"count": self.fallbacks, "queries": self.queries}}


def run_cases(paths: list[str] | None, pipeline: str = "default") -> RunReport:
    check_pipeline(pipeline)
    cases = load_cases(paths)
    bar, stories = Progress(f"run: {pipeline}", total=len(cases), unit="cases"), {}
    return RunReport([run_case(c, pipeline, stories=stories) for c in counted(cases, bar)])


# --- contrast ----------------------------------------------------------------------


def available_baselines() -> tuple[list[str], dict[str, str]]:
    """Bare retrievers that can run here, and why the others cannot; a retriever that
    declares `in_contrast = False` is left out of the matrix."""
    ok, missing = [], {}
    for name, reg in registered().items():
        if getattr(reg.factory, "in_contrast", True) is False:
            continue
        try:
            reg.factory()
            ok.append(name)
        except GardenError as exc:
            missing[name] = exc.messages[0]
        except Exception as exc:  # a broken plugin costs its column, not the matrix
            missing[name] = f"{type(exc).__name__}: {exc}"
    return ok, missing


@dataclass
class ContrastReport:
    pipelines: list[str]
    cases: list[LoadedCase]
    cells: dict[tuple[str, str], CaseResult]
    unavailable: dict[str, str]

    def baselines_failing(self, case_id: str) -> list[str]:
        """The bare columns that fail the case: `default` and its variants are no baselines."""
        return [p for p in self.pipelines if split_structured(p) is None and not self.cells[(case_id, p)].passed]

    def is_contrast(self, case_id: str) -> bool:
        """A contrast proves the structure's worth: `default` passes it and a bare
        retriever fails it. A case `default` fails too is a known miss, not a contrast."""
        return self.cells[(case_id, "default")].passed and bool(self.baselines_failing(case_id))

    def to_json(self) -> dict:
        rows = []
        for c in self.cases:
            cells = {}
            for p in self.pipelines:
                r = self.cells[(c.id, p)]
                cells[p] = {"passed": r.passed, "main_passed": r.main.passed,
                            "controls_passed": sum(x.passed for x in r.controls),
                            "controls": len(r.controls), "failures": r.main.failures
                            + [f"{x.name}: {f}" for x in r.controls for f in x.failures]}
            rows.append({"case": c.id, "suite": c.suite, "contrast": self.is_contrast(c.id),
                         "baselines_failing": self.baselines_failing(c.id), "pipelines": cells})
        default_passed = sum(self.cells[(c.id, "default")].passed for c in self.cases)
        return {"pipelines": self.pipelines, "cases": rows, "unavailable": self.unavailable,
                "summary": {"cases": len(self.cases), "default_passed": default_passed,
                            "contrasts": sum(self.is_contrast(c.id) for c in self.cases),
                            "default_failed_too": sum(1 for c in self.cases if self.baselines_failing(c.id)
                                                      and not self.cells[(c.id, "default")].passed)}}


def contrast(paths: list[str] | None, pipelines: list[str] | None = None) -> ContrastReport:
    """Every case under each bare baseline, the bare `pipelines` named beside them (a
    retriever with options, a model of one's own: `dense:model=DIR`), and `default`, then
    the structured `pipelines` named beside it (`default:exchange_share=0.5`). Whether a
    case is a contrast is `default`'s verdict against the bare columns alone."""
    named = list(dict.fromkeys(check_pipeline(name) for name in pipelines or []))
    variants = [p for p in named if split_structured(p) is not None and p != "default"]
    cases = load_cases(paths)
    baselines, unavailable = available_baselines()
    bare = [p for p in named if split_structured(p) is None and p not in baselines]
    pipelines = baselines + bare + ["default"] + variants
    bar, stories = Progress("contrast", total=len(cases) * len(pipelines), unit="cells"), {}
    cells = {(c.id, p): _contrast_cell(c, p, stories)
             for c, p in counted([(c, p) for c in cases for p in pipelines], bar)}
    return ContrastReport(pipelines, cases, cells, unavailable)


def _contrast_cell(loaded: LoadedCase, pipeline: str, stories: dict | None = None) -> CaseResult:
    """One case under one pipeline; a plugin retriever that raises fails its cell, with the
    error as the failure, instead of stopping the matrix."""
    if split_structured(pipeline) is not None or registered()[spec_text(pipeline)[0]].origin == "builtin":
        return run_case(loaded, pipeline, stories=stories)
    try:
        return run_case(loaded, pipeline, stories=stories)
    except Exception as exc:
        failure = QueryResult(None, False, [f"pipeline {pipeline} raised {type(exc).__name__}: {exc}"])
        return CaseResult(loaded.id, loaded.suite, pipeline, str(loaded.path), loaded.case.category, failure)


# --- promotion ---------------------------------------------------------------------

PROMOTION_RUNS = 3


def promote(case_path: str | Path, runs: int = PROMOTION_RUNS) -> tuple[Path, list[CaseResult]]:
    """Move a challenge case to regression/ after it and every control pass `runs`
    consecutive times under `default`, each run on freshly built indexes."""
    path = Path(case_path)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise GardenError(f"runs: a promotion needs at least one passing run, got {runs!r}")
    loaded = load_case(path)
    if loaded.suite != CHALLENGE:
        raise GardenError(f"{path}: only a case in challenge/ can be promoted (this one is in {loaded.suite})")
    results = []
    for _ in range(runs):
        with fresh_builds():
            result = run_case(loaded, "default")
        results.append(result)
        if not result.passed:
            lines = [f"{path}: not promoted: run {len(results)} of {runs} failed under default"]
            lines += [f"  {f}" for f in result.main.failures]
            lines += [f"  control {c.name!r}: {f}" for c in result.controls for f in c.failures]
            raise GardenError(lines, status=1)
    target_dir = path.resolve().parent.parent / REGRESSION
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    if target.exists():
        raise GardenError(f"{path}: not promoted: {target} already exists")
    shutil.move(str(path), str(target))
    return target, results
