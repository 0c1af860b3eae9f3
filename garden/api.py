"""The garden as a library: plain functions for notebooks and scripts.

Each function is one call into the same library the `garden` command uses, so a notebook
and the command line give the same answer to the same question. Results are plain data
(dicts and lists of JSON values, exactly what the matching `--json` command prints) or,
where the natural result is a table, a pandas DataFrame with the raw report kept in
``df.attrs["report"]``, as PyTerrier and ranx hand back their runs and evaluations.

Bad input raises `garden.GardenError`, whose ``messages`` are the located lines the command
line prints (file, record, field, value), one per problem.

Importing this module loads nothing heavy: the retrievers (and with them torch and
sentence-transformers) are imported inside the functions that run them, so ``import garden``
stays fast enough for a script that only lists pipelines or scaffolds a story.

    >>> from garden import api
    >>> packet = api.query("aurora-ridge", "Why have I not felt like gaming recently?",
    ...                    as_of="2030-01-06")
    >>> packet["items"][0]["id"]
    'state.mira.gaming'
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from garden.errors import GardenError

if TYPE_CHECKING:  # only for annotations: importing them here would load pydantic and pandas
    import pandas as pd

    from garden.models import Hints, Story
    from garden.pipelines import Pipeline
    from garden.rerank.stages import Settings

__all__ = [
    "GardenError",
    "compare",
    "compare_table",
    "ablate",
    "tune",
    "contrast",
    "contrast_report",
    "load_story",
    "new_story",
    "packet_table",
    "promote",
    "query",
    "run_case",
    "run_cases",
    "run_cases_report",
    "trace_files",
]

PathLike = str | os.PathLike
Paths = PathLike | Iterable[PathLike] | None


# --- inputs ------------------------------------------------------------------------


def _ready() -> None:
    """The command line checks GARDEN_HOME, GARDEN_TRACE_DAYS and GARDEN_TRACE before any
    work; a library call holds the same contract, so a bad setting is one GardenError before
    an index is built, not a failure halfway through a run."""
    from garden.derived.home import check_environment

    check_environment()


def _story_path(name_or_path: PathLike) -> Path:
    """A story name or a path to a story file.

    A name is looked up in fixtures/ of the working folder and then of each folder above
    it, as a case file's story is looked up from the case: a notebook runs in notebooks/,
    one level below the project, and must find the same stories the command finds."""
    from garden.formats.stories import resolve_story_path

    if isinstance(name_or_path, os.PathLike):
        path = Path(name_or_path)
        from garden._files import refuse_special

        refuse_special(path)
        if not path.is_file():
            raise GardenError(f"story file {path} does not exist")
        return path
    if not isinstance(name_or_path, str):
        raise GardenError(f"a story is a name, a path or a loaded Story, not {type(name_or_path).__name__}")
    return resolve_story_path(name_or_path, Path.cwd())


def _path_list(paths: Paths) -> list[str] | None:
    """One path or several, as the command line's PATH... arguments; None keeps the
    command's default (regression/ and challenge/ of the working folder)."""
    if paths is None:
        return None
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _names(value: str | Iterable[str] | None, what: str) -> list[str] | None:
    """A comma-separated string (as `--pipelines` takes it) or a list of names."""
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    names = list(value)
    if not all(isinstance(v, str) for v in names):
        raise GardenError(f"{what}: expected names (strings), got {names!r}")
    return names


# --- stories and queries -----------------------------------------------------------


def load_story(name_or_path: PathLike) -> "Story":
    """Load and validate a story: a name (fixtures/<name>.yaml of the working folder or a
    folder above it) or a path to a story file.

    Every validation rule of the story format runs; a story that breaks any of them raises
    `GardenError` listing every problem at once (file, record, field, value), so a story is
    fixed in one pass.

        >>> story = load_story("aurora-ridge")
        >>> story.by_id["state.mira.gaming"].kind
        'state'
    """
    from garden.formats.stories import load_story as _load

    return _load(_story_path(name_or_path))


def query(story: "PathLike | Story", text: str, *, pipeline: "str | Pipeline" = "default",
          as_of: dt.date | str | None = None, budget: int = 1200,
          hints: "Hints | Mapping[str, list[str]] | None" = None,
          settings: "Settings | Mapping[str, Any] | None" = None,
          include_private: bool = False, trace: bool = False, session: Sequence[str] = (),
          story_path: PathLike | None = None) -> dict:
    """One query: the packet as a JSON-able dict, exactly what `garden query --json` prints
    (decision, reason, warnings, items with labels and why, rejected, budget, and the best
    sittings, each with its score, rank and the records that carried it).

    `story` is a name, a path or a story already loaded with `load_story` (edit one in
    memory and query it without writing a file). `as_of` defaults, as on the command line,
    to the latest date the story mentions, never today, so a query gives the same packet
    whenever it runs. `hints` is ``{"topics": [...], "entities": [...]}``; `settings`
    overrides pipeline settings (``{"standout": 1.2}``). With ``trace=True`` the query is
    appended to today's trace file, ready for `compare`; off by default, so exploring in a
    notebook leaves no trail unless asked to. (A trace names a loaded story by its name, so
    a replay reads the story's file, not an in-memory edit; `story_path` names the file a
    story given loaded was read from, so its trace line can be replayed too.) `session` is
    the session's earlier queries, oldest first, as a case's `session` gives them.
    `pipeline` is a name (`garden pipelines` lists them) or a pipeline already made by
    `garden.pipelines.make_pipeline` (a server makes the ones it serves once).

        >>> packet = query("aurora-ridge", "Why have I not felt like gaming recently?",
        ...                as_of="2030-01-06")
        >>> [item["id"] for item in packet["items"]][:1]
        ['state.mira.gaming']
    """
    from garden.evaluation.runner import run_query
    from garden.formats.query_inputs import query_inputs
    from garden.formats.stories import latest_date
    from garden.models import Story
    from garden.rerank.query import QuerySpec

    _ready()
    as_of, budget, hints, overrides = query_inputs(pipeline, text, as_of, budget, hints, settings, session)
    if isinstance(story, Story):
        loaded, story_path = story, None if story_path is None else str(story_path)
    else:
        from garden.store.stored import open_story

        path = _story_path(story)
        loaded, story_path = open_story(path), str(path)
    spec = QuerySpec(loaded, text, as_of or latest_date(loaded), budget, hints, bool(include_private), overrides,
                     list(session), story_path)
    outcome = run_query(spec, pipeline, trace=trace)
    return outcome.packet.model_dump(mode="json", exclude={"fallback"})


def packet_table(packet: Mapping[str, Any]) -> "pd.DataFrame":
    """A packet's items as a table, one row per item in packet order (rank 1 leads), with
    id, kind, fidelity, labels, score and text: the shape to read two packets side by side.

        >>> packet_table(query("aurora-ridge", "Why have I not felt like gaming recently?",
        ...                    as_of="2030-01-06"))["id"].iloc[0]
        'state.mira.gaming'
    """
    import pandas as pd

    columns = ["id", "kind", "fidelity", "labels", "score", "text"]
    rows = [{c: item.get(c) for c in columns} for item in packet.get("items", [])]
    table = pd.DataFrame(rows, columns=columns, index=pd.RangeIndex(1, len(rows) + 1, name="rank"))
    table.attrs["decision"] = packet.get("decision")
    return table


def pipelines() -> dict[str, str]:
    """Every pipeline name with one line saying what it does, as `garden pipelines`: each
    registered retriever as a bare baseline (plugins included), and `default`.

        >>> "default" in pipelines() and "bm25" in pipelines()
        True
    """
    from garden.pipelines import describe_pipelines

    return dict(describe_pipelines())


# --- cases -------------------------------------------------------------------------


def run_cases_report(paths: Paths = None, pipeline: str = "default") -> dict:
    """Run cases under one pipeline: the report `garden run --json` prints (results,
    passed, failed, regression_failed, triage_fallbacks). `paths` are case files or folders;
    by default regression/ and challenge/ of the working folder.

        >>> run_cases_report("regression")["failed"]
        0
    """
    from garden.evaluation.runner import run_cases as _run_cases

    _ready()
    return _run_cases(_path_list(paths), pipeline).to_json()


def run_cases(paths: Paths = None, pipeline: str = "default") -> "pd.DataFrame":
    """Run cases under one pipeline: one row per case with case, suite, category,
    pipeline, passed, failures, controls_passed and controls (the total).

    `failures` lists every failed expectation of the case, its controls' included (each
    prefixed with the control's name), because `passed` is false when any control fails and
    a row that failed must say why on its own. The full report, as `run_cases_report`
    returns it, is in ``df.attrs["report"]``.

        >>> df = run_cases("regression")
        >>> bool(df["passed"].all())
        True
    """
    import pandas as pd

    report = run_cases_report(paths, pipeline)
    columns = ["case", "suite", "category", "pipeline", "passed", "failures", "controls_passed", "controls"]
    rows = []
    for r in report["results"]:
        failures = list(r["failures"]) + [f"control {c['name']!r}: {f}" for c in r["controls"] for f in c["failures"]]
        rows.append({"case": r["case"], "suite": r["suite"], "category": r.get("category"),
                     "pipeline": r["pipeline"], "passed": r["passed"], "failures": failures,
                     "controls_passed": sum(c["passed"] for c in r["controls"]), "controls": len(r["controls"])})
    table = pd.DataFrame(rows, columns=columns)
    table.attrs["report"] = report
    return table


def run_case(case_path: PathLike, pipeline: str = "default") -> dict:
    """One case under one pipeline, with the packet each of its queries was served: the
    case's row of `garden run --json`, plus ``packet`` for the case's own query and for each
    control. Read it to see *why* a case passes or fails, not only that it does.

        >>> result = run_case("regression/similar-wording.yaml", "bm25")
        >>> result["passed"], result["failures"][:1]
        (False, ['...'])
    """
    from garden.evaluation.runner import run_cases as _run_cases

    _ready()
    path = Path(case_path)
    if not path.is_file():
        raise GardenError(f"{path}: no such case file")
    (result,) = _run_cases([str(path)], pipeline).results
    data = result.to_json()
    data["packet"] = result.main.packet
    for control, ran in zip(data["controls"], result.controls):
        control["packet"] = ran.packet
    return data


def contrast_report(paths: Paths = None, pipelines: str | Iterable[str] | None = None) -> dict:
    """Every case under each bare retriever (and the bare `pipelines` named beside them:
    `dense:model=DIR`) and under `default`: the report `garden contrast --json` prints
    (pipelines, cases with each cell and the baselines that fail it, retrievers that could
    not run here, summary).

        >>> contrast_report("regression")["summary"]["contrasts"] > 0
        True
    """
    from garden.evaluation.runner import contrast as _contrast

    _ready()
    return _contrast(_path_list(paths), _names(pipelines, "pipelines")).to_json()


def contrast(paths: Paths = None, pipelines: str | Iterable[str] | None = None) -> "pd.DataFrame":
    """The contrast matrix: one row per case (the index), one boolean column per pipeline
    (did the case and all its controls pass under it), then ``contrast``: true when at
    least one bare baseline fails the case. A case no baseline fails proves nothing about
    the structure `default` adds, which is why the flag is there. The full report, with each
    cell's failures, is in ``df.attrs["report"]``.

        >>> matrix = contrast("regression")
        >>> bool(matrix["default"].all()), bool(matrix["contrast"].all())
        (True, True)
    """
    import pandas as pd

    report = contrast_report(paths, pipelines)
    names = list(report["pipelines"])
    rows = {c["case"]: {**{p: c["pipelines"][p]["passed"] for p in names}, "contrast": c["contrast"]}
            for c in report["cases"]}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[*names, "contrast"])
    table.index.name = "case"
    table.attrs["report"] = report
    return table


# --- comparing pipelines -----------------------------------------------------------


def compare(source: PathLike, pipelines: str | Iterable[str], baseline: str | None = None,
            metrics: str | Iterable[str] | None = None, negatives: str | None = None,
            negatives_per_store: int | None = None, negatives_seed: int | None = None,
            trec_dir: PathLike | None = None, form: str | None = None) -> dict:
    """The same queries under several pipelines: the report `garden compare --json` prints
    (metric means per pipeline, paired tests against the baseline, and for stories the
    forbidden hits and each query's top items side by side under ``per_query``).

    `source` is a case file or folder (judged by each case's expectations), a trace file
    (judged by its cases, else by the packet served), a collection folder, or LoCoMo (a
    file, a folder of them, or `garden import locomo` output; judged by the evidence turns,
    reported at turn and session level, by category, with the packet: see docs/figures.md). `pipelines`
    and `metrics` are lists or comma-separated strings; the baseline defaults to the first
    pipeline. On LoCoMo, `negatives="foreign"` adds unanswerable questions built from the
    stores (`negatives_per_store` of them each, seeded by `negatives_seed`, 0 by default), and the report's
    ``packet`` block says what each pipeline answered on both kinds; `form` ("raw" or
    "messages") reads LoCoMo's chats in that form. `trec_dir` receives every pipeline's
    TREC run and the qrels beside them, on every kind. An option the source's kind does not
    take is refused naming the kind.

        >>> report = compare("regression", ["bm25", "default"])
        >>> sorted(report["pipelines"])
        ['bm25', 'default']
    """
    from garden.evaluation.kinds.registry import compare_source

    _ready()
    names = _names(pipelines, "pipelines") or []
    measures = _names(metrics, "metrics")
    report = compare_source(os.fspath(source), names, baseline=baseline,
                            metrics=measures, negatives=negatives,
                            negatives_per_store=negatives_per_store, negatives_seed=negatives_seed,
                            trec_dir=None if trec_dir is None else os.fspath(trec_dir), form=form)
    return report.to_json()


def compare_table(source: PathLike, pipelines: str | Iterable[str], baseline: str | None = None,
                  metrics: str | Iterable[str] | None = None) -> "pd.DataFrame":
    """`compare` as a table: one row per pipeline, one column per metric mean (in the order
    the metrics were asked for), then forbidden hits and queries per second where the source
    gives them. The full report is in ``df.attrs["report"]``.

        >>> table = compare_table("regression", "bm25,default", metrics="AP,RR")
        >>> list(table.columns[:2])
        ['AP', 'RR']
    """
    import pandas as pd

    report = compare(source, pipelines, baseline, metrics)
    extra = [k for k in ("forbidden_hits", "queries_per_s")
             if any(k in values for values in report["pipelines"].values())]
    table = pd.DataFrame.from_dict(report["pipelines"], orient="index", columns=[*report["measures"], *extra])
    table.index.name = "pipeline"
    table.attrs["report"] = report
    return table


def trace_files() -> list[str]:
    """Trace files in the derived-data folder (`GARDEN_HOME`, else .garden/), oldest day
    first: what `query(..., trace=True)` and every case run appended to, ready for
    `compare`.

        >>> trace_files()[-1].endswith(".jsonl")
        True
    """
    from garden.pipelines.traces import trace_dir, trace_day

    _ready()
    folder = trace_dir()
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if trace_day(p.name) is not None and p.is_file() and not p.is_symlink()]
    return [str(p) for p in sorted(found, key=lambda p: p.name)]


# --- growing the garden ------------------------------------------------------------


def new_story(name: str, root: PathLike = ".") -> dict[str, str]:
    """Scaffold a story and a starter challenge case that already checks and runs, as
    `garden new-story`: ``{"story": fixtures/<name>.yaml, "case": challenge/<name>-starter.yaml}``
    under `root`. Nothing is overwritten: an existing file is a GardenError.

        >>> paths = new_story("tidewell", root="/tmp/project")
        >>> paths["case"]
        '/tmp/project/challenge/tidewell-starter.yaml'
    """
    from garden.formats.scaffold import new_story as _new_story

    if not isinstance(name, str):
        raise GardenError(f"story name: expected a string, got {type(name).__name__}")
    story, case = _new_story(name, Path(root))
    return {"story": str(story), "case": str(case)}


def promote(case_path: PathLike, runs: int = 3) -> dict:
    """Move a challenge case to regression/ once it and every control pass `runs`
    consecutive times under `default`, each on freshly built indexes, as `garden promote`.
    A case that fails a run stays where it is and raises GardenError naming each failure.

    Returns ``{"case", "from", "to", "runs", "results"}`` (each run's case row).

        >>> moved = promote("challenge/tidewell-starter.yaml")
        >>> moved["to"].endswith("regression/tidewell-starter.yaml")
        True
    """
    from garden.evaluation.runner import promote as _promote

    _ready()
    source = Path(case_path)
    target, results = _promote(source, runs)
    return {"case": source.stem, "from": str(source), "to": str(target), "runs": len(results),
            "results": [r.to_json() for r in results]}


def ablate(source: PathLike, stages: str | Iterable[str] | None = None, metrics: str | Iterable[str] | None = None,
           pipeline: str = "default") -> "pd.DataFrame":
    """What each stage of `pipeline` (`default`, a variant `default:SETTING=VALUE`, or
    `default@RETRIEVER` on another base) is worth on `source` (case files or a folder of
    them, a trace, a collection): one row per stage removed, with the cases it decides
    (they pass only with it), the cases it hurts, and per metric the full pipeline's figure
    minus the figure without the stage, with the Holm-adjusted p of the paired
    randomization test. The whole report, with which
    judgments it rests on, is in ``df.attrs["report"]``.

        >>> table = ablate("regression", stages="phrase")
        >>> "named-phrase" in table.loc["phrase", "decides"]
        True
    """
    import pandas as pd

    from garden.evaluation.ablate import ablate as _ablate

    _ready()
    chosen = _names(stages, "stages")
    names = _names(metrics, "metrics")
    report = _ablate(str(source), full=pipeline, stages=chosen, metrics=names).to_json()
    rows = []
    for stage, row in report["stages"].items():
        cells = {"stage": stage, "pipeline": row["pipeline"], "decides": row["decides"], "hurts": row["hurts"]}
        for metric, figures in row["metrics"].items():
            cells[f"delta {metric}"] = figures["delta"]
            cells[f"p {metric}"] = figures["p_adjusted"]
        rows.append(cells)
    table = pd.DataFrame(rows).set_index("stage")
    table.attrs["report"] = report
    return table


def tune(source: PathLike, grid: str | Iterable[str], pipeline: str = "default", measure: str = "nDCG@10",
         out: PathLike | None = None) -> dict:
    """Choose a setting of `pipeline` on `source` (LoCoMo or LongMemEval, a file or its
    import) as the project chooses its own (garden/evaluation/tune.py): folds over the
    stores, each fold scored by the point of `grid` (`"NAME=V1,V2"`, or several) chosen on
    the others by `measure`, held out against the pipeline as it is, per question shape.
    Returns the report as plain data (each fold's choice under "chosen", the held-out
    figures under "held_out"); written as JSON to `out` when given."""
    from garden.evaluation.tune import tune as _tune

    _ready()
    given = [grid] if isinstance(grid, str) else list(grid)
    return _tune(str(source), pipeline, given, measure, out).to_json()
