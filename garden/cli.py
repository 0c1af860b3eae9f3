"""The `garden` command: a thin shell, each command one call into the library."""
from __future__ import annotations

import argparse
import math
import functools
import re
import datetime as dt
import json
import os
import sys
from pathlib import Path

from garden.text import one_line
from garden.errors import GardenError
from garden.evaluation.negatives import NEGATIVE_KINDS
from garden.evaluation.published import AGAINST
from garden.evaluation.runner import PROMOTION_RUNS
from garden.models import DEFAULT_BUDGET
from garden.formats.chats import FORMS as CHAT_FORMS
from garden.formats.layout import CHALLENGE, DURABLE_FOLDERS
from garden.formats.query_inputs import read_budget, read_date
from garden.derived.home import check_environment

EPILOG = ("Exit codes: 0 success; 1 a check or a regression case failed; 2 bad input or usage, "
          "with one located line per problem.")
MESSAGE_LIMIT = 1000  # characters of one printed problem line
LEVELS = ("turn", "session")   # what `garden query` shows: the packet's items, or the sittings ranked


def package_version() -> str:
    """The installed package's version, as its metadata records it (pyproject.toml); the
    parser is built for every command, so a source tree run without installing still runs."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pinecone-garden")
    except PackageNotFoundError:
        return "unknown (the package is not installed)"


def _read(reader):
    """An argparse type from a reader of garden.formats.query_inputs: the line the API and a
    server give for the same input, after the parser's name for the flag."""
    def parse(text: str):
        try:
            return reader(text)
        except GardenError as exc:
            raise argparse.ArgumentTypeError(exc.messages[0]) from None

    return parse


def _whole_or_text(text: str) -> int | str:
    """`text` as the whole number it spells, or itself for the reader to refuse."""
    try:
        return int(text)
    except ValueError:
        return text


_date = _read(read_date)
_budget = _read(lambda text: read_budget(_whole_or_text(text), None))


def _float_or(text: str, otherwise):
    """`text` as a float, else `otherwise`: the argparse types below say what is wrong."""
    try:
        return float(text)
    except ValueError:
        return otherwise


def _standout(text: str) -> float:
    from garden.models import check_standout

    value = _float_or(text, text)
    try:
        return check_standout(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _at_least_one(what: str):
    """An argparse type: a whole number of at least 1, refused naming `what` it counts."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
        return value

    return parse


_sample_size = _at_least_one("a sample is a whole number of questions, at least 1")


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _seconds(text: str) -> float:
    value = _float_or(text, math.nan)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


def _say(*lines: str, prose: bool = False) -> None:
    """Report lines for a person: each wrapped at spaces to the reader's width when the
    output is a terminal or COLUMNS names one, whole otherwise; `prose`, at 80 even then
    (see garden/_terminal.py)."""
    from garden._terminal import echo

    echo([part for line in lines for part in str(line).split("\n")], prose=prose)


def print_json(data) -> None:
    """Strict JSON (RFC 8259, section 6: no NaN, no Infinity): Python's json writes bare
    NaN by default, which no strict parser reads. A non-finite number is refused before
    anything is printed, as one line, rather than printed as invalid JSON."""
    try:
        text = json.dumps(data, indent=2, default=str, allow_nan=False)
    except ValueError as exc:
        raise GardenError(f"--json: the output holds a number JSON cannot write ({exc}); nothing printed") from None
    print(text)


def _emit(args, result) -> None:
    """A result as JSON with --json, else its own table."""
    if args.json:
        print_json(result.to_json())
    else:
        result.show()


def cmd_check(args) -> int:
    from garden.formats.stories import build_index, find_story_files, load_story, resolve_story_path

    paths = [resolve_story_path(s) for s in args.stories] if args.stories else find_story_files()
    if not paths:
        raise GardenError("no stories to check: fixtures/ holds no .yaml file")
    status = 0
    for path in paths:
        # A story that cannot be read or does not validate is what `check` exists to
        # find (exit 1, the other stories still checked); a derived folder that cannot be
        # written is bad input to the command (exit 2) and stops it.
        try:
            load_story(path)
        except GardenError as exc:
            status = 1
            for line in exc.messages:
                _say(line)
            continue
        _say(f"ok {path} -> {build_index(path)}")
    _say(f"{len(paths)} stories checked, {'errors found' if status else 'all valid'}")
    return status


def cmd_run(args) -> int:
    from garden.evaluation.runner import run_cases

    report = run_cases(args.paths, args.pipeline)
    if args.json:
        print_json(report.to_json())
    else:
        from garden.report import show_run

        show_run(report)
    return report.exit_code()


def cmd_contrast(args) -> int:
    from garden.evaluation.runner import contrast

    report = contrast(args.paths, _csv(args.pipelines))
    if args.json:
        print_json(report.to_json())
    else:
        from garden.report import show_contrast

        show_contrast(report, reasons=args.reasons)
    return 0


def cmd_query(args) -> int:
    from garden.api import query

    hints = {"topics": [], "entities": []}
    for hint in args.hint:
        kind, _, value = hint.partition("=")
        key = {"topic": "topics", "entity": "entities"}.get(kind)
        if key is None or not value:
            raise GardenError(f"--hint {hint!r}: expected topic=ID or entity=ID")
        hints[key].append(value)
    settings = {"standout": args.standout} if args.standout is not None else None
    packet = query(args.story, args.text, pipeline=args.pipeline, as_of=args.as_of, budget=args.budget,
                   hints=hints, settings=settings, include_private=args.include_private, trace=True)
    if args.json:
        print_json(packet)
    else:
        from garden.models import Packet
        from garden.report import show_packet

        show_packet(Packet.model_validate(packet), args.pipeline, args.level)
    return 0


def cmd_promote(args) -> int:
    from garden.evaluation.runner import promote

    target, results = promote(args.case, args.runs)
    _say(f"promoted {args.case} -> {target} after {len(results)} passing runs under default")
    return 0


def cmd_new_story(args) -> int:
    from garden.formats.scaffold import new_story

    story, case = new_story(args.name, Path(args.root))
    _say(f"wrote {story}\nwrote {case}\nnext: garden check {args.name} && garden run {case}")
    return 0


def cmd_pipelines(args) -> int:
    from garden.pipelines import describe_pipelines

    described = describe_pipelines()
    if args.json:
        print_json(described)
    else:
        for name, text in described.items():
            _say(f"{name:10} {text}")
    return 0


def cmd_schemas(args) -> int:
    from garden.formats.schemas import write_schemas

    for path in write_schemas(Path(args.out)):
        _say(f"wrote {path}")
    return 0


def cmd_compare(args) -> int:
    from garden.evaluation.kinds.registry import compare_source

    pipelines = _csv(args.pipelines) or []
    report = compare_source(args.source, pipelines, baseline=args.baseline, trec_dir=args.trec_dir,
                            plot=args.plot, metrics=_csv(args.metrics), trace_source=args.trace_source,
                            judgments=args.judgments, since=args.since, until=args.until,
                            negatives=args.negatives, negatives_per_store=args.negatives_per_store,
                            negatives_seed=args.negatives_seed, scoring=args.scoring, against=args.against,
                            form=args.form)
    _emit(args, report)
    return 0


def cmd_judge(args) -> int:
    from garden.evaluation.judge import answers_from, judge
    from garden.evaluation.judgments import default_judgments

    pipelines = _csv(args.pipelines)
    path = Path(args.judgments) if args.judgments else default_judgments(Path(args.trace))
    summary = judge(args.trace, path, answers_from(args.answers), pipelines, args.trace_source, args.since, args.until)
    for line in summary.lines():
        _say(line)
    return 0


def cmd_capture(args) -> int:
    from garden.evaluation.capture import capture
    from garden.evaluation.judgments import default_judgments

    path = Path(args.judgments) if args.judgments else default_judgments(Path(args.trace))
    captured = capture(args.trace, args.query, path, args.name, args.out, args.force, args.trace_source,
                       args.since, args.until)
    _say(f"wrote {captured.path}" + (" (it already passes under default: captured with --force)"
                                      if captured.forced else ": default misses it"))
    for failure in captured.failures:
        _say(f"  {failure}")
    return 0


def cmd_ablate(args) -> int:
    from garden.evaluation.ablate import ablate

    result = ablate(args.source, full=args.pipeline, stages=_csv(args.stages), metrics=_csv(args.metrics),
                    negatives=args.negatives, trace_source=args.trace_source, form=args.form)
    _emit(args, result)
    return 0


def cmd_tune(args) -> int:
    from garden.evaluation.tune import tune

    _emit(args, tune(args.source, args.pipeline, args.grid, args.measure, args.out))
    return 0


CHAT_IMPORTS = {"chat-messages": "messages", "chat-raw": "raw"}  # import kind -> the form it writes


def cmd_import(args) -> int:
    if args.kind in CHAT_IMPORTS:
        from garden.formats.chats import locomo_files, write_form

        form = CHAT_IMPORTS[args.kind]
        if args.sample is not None or args.seed is not None:
            raise GardenError(f"--sample and --seed: only for longmemeval (the {form} form takes every conversation)")
        write_form(Path(args.path), Path(args.out), form)
        _say(f"{len(locomo_files(Path(args.path)))} LoCoMo files written in the {form} form into {args.out} "
             f"(`garden compare {args.out}` reads them as LoCoMo)")
        return 0
    if args.kind == "longmemeval":
        from garden.formats.longmemeval import import_longmemeval

        if args.seed is not None and args.sample is None:
            raise GardenError("--seed: draws a sample, so it needs --sample N")
        lme = import_longmemeval(Path(args.path), Path(args.out), sample=args.sample,
                                 seed=args.seed if args.seed is not None else 0)
        for line in lme.lines():
            _say(line)
        _say(f"{lme.questions} questions imported into {args.out}")
        return 0
    from garden.formats.locomo import import_locomo

    given = [name for name, value in (("--sample", args.sample), ("--seed", args.seed)) if value is not None]
    if given:
        raise GardenError(f"{' and '.join(given)}: only for longmemeval (a LoCoMo import takes every conversation)")
    report = import_locomo(Path(args.path), Path(args.out))
    for line in report.lines():
        _say(line)
    _say(f"{len(report.conversations)} conversations imported into {args.out}")
    return 0


def cmd_traces(args) -> int:
    from garden.derived.home import check_environment, parse_days
    from garden.evaluation.runner import retention_days
    from garden.pipelines.traces import prune_traces, trace_dir

    check_environment()
    # parsed here, not by argparse, so a bad value is one line like every other bad input
    keep_days = retention_days() if args.keep_days is None else parse_days(args.keep_days, "--keep-days")
    removed = prune_traces(args.today, keep_days)
    for path in removed:
        _say(f"removed {path}")
    _say(f"{len(removed)} trace files older than {keep_days} days removed from {trace_dir()}")
    return 0


def _csv(text: str | None) -> list[str] | None:
    """A comma-separated flag (`--pipelines bm25,default`) as the list the library takes."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def _show(args, report) -> None:
    """A store report as JSON (`--json`) or as its lines."""
    if args.json:
        print_json(report.to_json())
    else:
        _say(*report.lines())


def cmd_doctor(args) -> int:
    from garden.store.doctor import run_doctor

    report = run_doctor(args.root, repair=args.repair)
    _show(args, report)
    return report.exit_code()


def cmd_backup(args) -> int:
    from garden.evaluation.drill import case_verdicts
    from garden.store.backup import write_backup

    _show(args, write_backup(args.root, args.out, pipeline=args.pipeline, verdicts=case_verdicts))
    return 0


def cmd_restore(args) -> int:
    from garden.evaluation.drill import run_drill
    from garden.store.restore import restore

    report = restore(args.archive, args.into, drill=run_drill if args.verify else None)
    _show(args, report)
    return report.exit_code()


def cmd_explore(args) -> int:
    from garden.explore import write_explorer

    _say(write_explorer(args.out, args.story, args.text, as_of=args.as_of, pipeline=args.pipeline,
                         baseline=args.baseline, case=args.case, trace=args.trace, question=args.query,
                         trace_source=args.trace_source))
    return 0


def cmd_generate(args) -> int:
    from garden.formats.generate import generate

    _say(*generate(args.name, args.records, args.seed, args.out, args.force).lines(), prose=True)
    return 0


def cmd_serve(args) -> int:
    from garden.serve import serve

    pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()] if args.pipelines else None
    return serve(args.stories, host=args.host, port=args.port, allow_remote=args.allow_remote, mcp=args.mcp,
                 workers=args.workers, pipelines=pipelines, allow_hosts=args.allow_host, token_file=args.token_file,
                 deadline=args.deadline, read_timeout=args.read_timeout, max_connections=args.max_connections,
                 writable=args.writable)


def _trace_window(p: argparse.ArgumentParser) -> None:
    """--since/--until: the days of a folder of traces to read (from the files' names)."""
    p.add_argument("--since", type=_date, help="of a folder of traces: the first day read (YYYY-MM-DD)")
    p.add_argument("--until", type=_date, help="of a folder of traces: the last day read (YYYY-MM-DD)")


def _trace_source(p: argparse.ArgumentParser, of: str = "") -> None:
    """--source: which of a trace's events to read; every command reading a trace has it."""
    p.add_argument("--source", dest="trace_source", choices=("query", "case"),
                   help=f"{of}only free queries (query: what was typed into `garden query` or asked of "
                        "`garden serve`) or only case runs (case); a question keeps its number either way")


def _question(p: argparse.ArgumentParser, required: bool) -> None:
    """--query: a trace's question, named as every command names it."""
    p.add_argument("--query", required=required, metavar="N|QID|TEXT",
                   help="the question: its number in the trace (as `garden judge` and `garden compare` show it), "
                        "its qid, or its exact text")


def _source_and_pipeline(p: argparse.ArgumentParser, source: str, pipeline: str) -> None:
    """The source a command measures on and the pipeline it starts from (`default` unless
    given)."""
    p.add_argument("source", help=source)
    p.add_argument("--pipeline", default="default", help=pipeline)


def _command(sub, name: str, func, help: str, json: str | None = None) -> argparse.ArgumentParser:
    """One subcommand: its help line, the function it calls and, when it has one, --json."""
    p = sub.add_parser(name, help=help)
    p.set_defaults(func=func)
    if json:
        p.add_argument("--json", action="store_true", help=json)
    return p


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors made one safe line: they quote what was typed (an
    unknown argument, an invalid choice), which may hold escape sequences."""

    def error(self, message: str):
        from garden.text import one_line

        super().error(one_line(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="garden", description="Contrast cases and pluggable retrievers for "
                                     "experiments in memory retrieval.", epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"garden {package_version()}",
                        help="print the package's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _command(sub, "contrast", cmd_contrast, "the main job: every case under each bare retriever and under default",
                 json="print JSON instead of the table")
    p.add_argument("paths", nargs="*", help="case files or folders (default: regression/ and challenge/)")
    p.add_argument("--reasons", action="store_true", help="list every failing cell's failures below the matrix "
                   "(by default only why each case that is no contrast is not one)")
    p.add_argument("--pipelines", metavar="A,B,...", help="more bare pipelines as columns beside the baselines, "
                   "options included (a model of your own: dense:model=DIR), and variants of default beside it "
                   "(default:exchange_share=0.5)")

    p = _command(sub, "run", cmd_run, "run cases; exit 1 only if a regression case fails",
                 json="print JSON instead of the table")
    p.add_argument("paths", nargs="*", help="case files or folders (default: regression/ and challenge/)")
    p.add_argument("--pipeline", default="default", help="pipeline name (see `garden pipelines`)")

    p = _command(sub, "query", cmd_query, "one query: the packet with labels, reasons and why",
                 json="print the packet as JSON")
    p.add_argument("story", help="a story name in fixtures/ or a path to a story .yaml")
    p.add_argument("text", help="the query")
    p.add_argument("--as-of", type=_date, help="injected now (default: the latest date in the story)")
    p.add_argument("--budget", type=_budget, default=DEFAULT_BUDGET,
                   help=f"packet budget in characters (default {DEFAULT_BUDGET})")
    p.add_argument("--hint", action="append", default=[], help="topic=ID or entity=ID (repeatable)")
    p.add_argument("--pipeline", default="default", help="pipeline name (default: default)")
    p.add_argument("--standout", type=_standout, help="standout ratio, at least 1 (1 turns the cutoff off)")
    p.add_argument("--include-private", action="store_true", help="allow private records into the packet")
    p.add_argument("--level", choices=LEVELS, default="turn",
                   help="what the table shows: turn, the packet's items (default), or session, the sittings ranked, "
                        "each with its score and the records that carried it; --json holds both")

    p = _command(sub, "check", cmd_check, "validate stories and build their indexes; exit 1 with located errors")
    p.add_argument("stories", nargs="*", help="story names or paths (default: every fixtures/*.yaml)")

    p = _command(sub, "new-story", cmd_new_story, "scaffold a story and a starter challenge case that already runs")
    p.add_argument("name", help="story name: lower-case letters, digits and dashes")
    p.add_argument("--root", default=".", help="project folder holding fixtures/ and challenge/ (default .)")

    p = _command(sub, "promote", cmd_promote, "move a challenge case to regression/ after repeated passing runs")
    p.add_argument("case", help="path to the challenge case file")
    p.add_argument("--runs", type=int, default=PROMOTION_RUNS,
                   help=f"consecutive passing runs required (default {PROMOTION_RUNS})")

    p = _command(sub, "compare", cmd_compare, "replay the same queries under several pipelines, side by side, "
                 "every figure by the question's shape too (gathering or pinpoint)",
                 json="print JSON")
    p.add_argument("source", help="a collection folder (TREC or BEIR), a case file or folder, a trace file, "
                                  "LoCoMo (a file, a folder of them, or `garden import locomo` output), or "
                                  "LongMemEval (a released .json or .json.gz file, or `garden import longmemeval` "
                                  "output)")
    p.add_argument("--pipelines", required=True, help="comma-separated pipeline names, variants included "
                   "(default,default:exchange_share=0.5)")
    p.add_argument("--baseline", help="pipeline the others are tested against (default: the first)")
    p.add_argument("--metrics", help="comma-separated ir-measures names (default AP,nDCG@10,R@1000,RR,P@10; on "
                   "LoCoMo and LongMemEval added to their fixed measures)")
    p.add_argument("--trec-dir", help="write one TREC run file per pipeline here, and the qrels beside them "
                   "(LoCoMo and LongMemEval: the turn level, and the session level as *.session.run)")
    p.add_argument("--plot", help="write a PNG of per-query differences against the baseline (LoCoMo: the "
                                  "risk-coverage plot of answering against staying silent)")
    p.add_argument("--negatives", choices=NEGATIVE_KINDS,
                   help="LoCoMo or an imported store set: add unanswerable questions built from the stores "
                        "(foreign: each store asked other stores' questions, its own people's names put in)")
    p.add_argument("--negatives-per-store", type=int,
                   help="negatives asked of each store (default: as many as the smallest store asks)")
    p.add_argument("--negatives-seed", type=int, help="seed of the negatives' sample (default 0)")
    p.add_argument("--form", choices=CHAT_FORMS, help="LoCoMo files: read the chats as released (with the "
                   "generated observations and summaries), raw (turns only) or as messages (each turn sent as "
                   "the messages a person types; garden import chat-messages writes them)")
    p.add_argument("--scoring", choices=("garden", "longmemeval"),
                   help="LongMemEval: longmemeval adds the authors' own measures (their gold, discount and k, "
                        "at turn and session level) beside the garden's (default garden)")
    p.add_argument("--against", choices=AGAINST,
                   help="LongMemEval: set the authors' session recall_all@5, recall_any@5 and ndcg_any@10 beside "
                        "published systems' figures, each with the questions and scoring it rests on (implies "
                        "--scoring longmemeval)")
    _trace_source(p, "of a trace: ")
    p.add_argument("--judgments", help="of a trace: a person's grades and verdicts from `garden judge` (qrels file)")
    _trace_window(p)

    p = _command(sub, "judge", cmd_judge, "adjudicate a trace's distinct questions: grade what each pipeline "
                 "served, and say what should have happened; resumable, every verdict saved at once")
    p.add_argument("trace", help="a trace file (.garden/traces/trace-YYYY-MM-DD.jsonl) or a folder of them")
    p.add_argument("--judgments", help="qrels file to write (default judgments/TRACE-STEM.qrels; question "
                                       "verdicts go beside it in STEM.questions.jsonl)")
    p.add_argument("--answers", help="read the answers from this file, one per line as typed (default: stdin)")
    p.add_argument("--pipelines", help="comma-separated pipelines to pool (default: those the trace recorded)")
    _trace_source(p)
    _trace_window(p)

    p = _command(sub, "capture", cmd_capture, "turn an adjudicated miss from a trace into a challenge case; "
                 "refused (exit 1) if default already passes it")
    p.add_argument("trace", help="the trace file (or folder of them) the question was judged on")
    _question(p, required=True)
    p.add_argument("--judgments", help="the judgments (default judgments/TRACE-STEM.qrels)")
    p.add_argument("--name", help="case id (default: made from the query's words)")
    p.add_argument("--out", default=CHALLENGE, help=f"folder to write the case into (default {CHALLENGE}/)")
    p.add_argument("--force", action="store_true", help="capture even if default already passes it")
    _trace_source(p)
    _trace_window(p)

    p = _command(sub, "tune", cmd_tune,
                 "choose a stage's setting as the project chooses its own: folds over the source's stores, each "
                 "scored by the point chosen on the others, against the pipeline as it is", json="print JSON")
    _source_and_pipeline(p, "LoCoMo (a file, a folder of them, or its import) or LongMemEval (a released file or "
                         "its import)", "the pipeline as it is, a point of the grid too (default: default)")
    p.add_argument("--grid", action="append", required=True, metavar="NAME=V1,V2",
                   help="a stage's setting and the values to choose among (repeatable: every combination)")
    p.add_argument("--measure", default="nDCG@10", help="what a point is chosen by: nDCG@10, R@10 or Success@5 "
                   "(default nDCG@10)")
    p.add_argument("--out", help="write the choice and its figures here as JSON")

    p = _command(sub, "ablate", cmd_ablate,
                 "the full pipeline and each one-stage-removed variant: what each stage decides, over every "
                 "question and by the question's shape", json="print JSON")
    _source_and_pipeline(p, "case files or a folder of them, a trace file, a collection folder, LoCoMo, "
                         "LongMemEval, or any other registered kind (docs/extending.md)",
                         "the full pipeline: default, default with stage settings (default:exchange_share=0.5), "
                         "or default@RETRIEVER on another base (default@dense:model=DIR)")
    p.add_argument("--stages", help="comma-separated stages to remove one at a time (default: every removable one)")
    p.add_argument("--metrics", help="comma-separated ir-measures names (LoCoMo and LongMemEval: added to their "
                   "fixed measures)")
    p.add_argument("--negatives", choices=NEGATIVE_KINDS,
                   help="LoCoMo: add unanswerable questions built from the stores (see compare)")
    p.add_argument("--form", choices=CHAT_FORMS, help="LoCoMo files: read the chats as released, raw or as "
                   "messages (see compare)")
    _trace_source(p, "of a trace: ")

    _command(sub, "pipelines", cmd_pipelines, "list every pipeline name, with the stages of the structured ones",
             json="print JSON")

    p = _command(sub, "schemas", cmd_schemas, "write JSON Schema files for stories, cases, packets and traces")
    p.add_argument("--out", default="schemas", help="output folder (default schemas/)")

    p = _command(sub, "import", cmd_import, "import a public dataset as garden stories and cases")
    p.add_argument("kind", choices=["locomo", "longmemeval", *CHAT_IMPORTS],
                   help="the dataset's format: locomo (Maharana et al., ACL 2024) or longmemeval (Wu et al., "
                        "ICLR 2025); chat-messages or chat-raw: LoCoMo files rewritten as LoCoMo files in the "
                        "messaging form or as raw logs (see compare --form), judged by the same questions")
    p.add_argument("path", help="locomo, chat-messages, chat-raw: a LoCoMo conversation file, a folder of them, "
                   "or a locomo10.json; "
                                "longmemeval: a released .json or .json.gz file (oracle, S or M)")
    p.add_argument("--out", default=".", help="project folder to write fixtures/ and cases/ into (default .); "
                   "chat-messages, chat-raw: the folder the LoCoMo files are written into")
    p.add_argument("--sample", type=_sample_size, metavar="N",
                   help="longmemeval: import N questions, a sample stratified by question type")
    p.add_argument("--seed", type=_whole_number, metavar="S",
                   help="longmemeval: the sample's seed, a whole number (default 0); needs --sample")

    p = _command(sub, "traces", cmd_traces, "delete trace files older than the retention window")
    p.add_argument("--keep-days", metavar="N", help="retention window in days, 0 to 36500 "
                   "(default: GARDEN_TRACE_DAYS, else 14); today's and later traces are always kept")
    p.add_argument("--today", type=_date, default=dt.date.today(), help="the date ages are measured from")
    p = _command(sub, "doctor", cmd_doctor, "check the store's integrity rules: derived data owner-only, attachments "
                 "as hashed, no link leading outside; exit 1 if an enforced rule fails", json="print JSON")
    p.add_argument("--root", default=".", help="the store's root, holding fixtures/ (default .)")
    p.add_argument("--repair", action="store_true", help="fix the mode of derived files breaking an enforced rule; "
                   "never an attachment, a link or its target")

    durable = ", ".join(f"{name}/" for name in DURABLE_FOLDERS)
    p = _command(sub, "backup", cmd_backup, f"archive the durable part ({durable}) with a manifest of hashes "
                 "and the cases' verdicts", json="print JSON")
    p.add_argument("--root", default=".", help="the store's root, holding fixtures/ (default .)")
    p.add_argument("--out", required=True, help="the archive to write (.tar.gz); it must not exist")
    p.add_argument("--pipeline", default="default", help="pipeline the verdicts are recorded under (default: default)")

    p = _command(sub, "restore", cmd_restore, "restore a backup into an empty folder, every hash checked; "
                 "--verify runs the restore drill", json="print JSON")
    p.add_argument("archive", help="an archive written by `garden backup`")
    p.add_argument("--into", required=True, help="an empty or absent folder to restore into")
    p.add_argument("--verify", action="store_true", help="rebuild the derived data there, run the cases and compare "
                   "them with the original's; exit 1 if any differs")

    p = _command(sub, "explore", cmd_explore, "draw one query as a graph and step through what each stage did "
                 "(one self-contained HTML page)")
    p.add_argument("story", nargs="?", help="a story name in fixtures/ or a path to a story .yaml")
    p.add_argument("text", nargs="?", help="the query")
    p.add_argument("--case", help="draw a case's query and controls instead: a case id in regression/ or "
                                  "challenge/, or a case file")
    p.add_argument("--trace", help="draw a traced question instead: a trace file or a folder of them, with --query")
    _question(p, required=False)
    _trace_source(p, "of --trace: ")
    p.add_argument("--as-of", type=_date, help="injected now (default: the latest date in the story)")
    p.add_argument("--pipeline", default="default", help="structured pipeline to step through (default: default)")
    p.add_argument("--baseline", default="bm25s", help="pipeline shown as tokens alone (default: bm25s)")
    p.add_argument("--out", default="explorer.html", help="HTML file to write (default explorer.html)")

    p = _command(sub, "generate", cmd_generate, "write a fictional story of N records, valid by construction, "
                 "with contrast cases whose expectations follow from what was planted")
    p.add_argument("name", help="story name: lower-case letters, digits, '-', '_' and '.'")
    p.add_argument("--records", required=True, metavar="N", help="records in the story (at least 200)")
    p.add_argument("--seed", default="0", metavar="S", help="a whole number; the same seed gives the same bytes "
                   "(default 0)")
    p.add_argument("--out", metavar="FILE", help="story file, NAME.yaml or NAME.jsonl; the suffix picks the form "
                   "(default fixtures/NAME.yaml, or fixtures/NAME.jsonl past 10,000 records, too many for YAML); "
                   "the cases go to cases/NAME/ beside its fixtures folder")
    p.add_argument("--force", action="store_true", help="replace an existing story file and cases folder")

    p = _command(sub, "serve", cmd_serve, "answer queries over HTTP (or MCP on stdio with --mcp) from one process "
                 "that keeps the stories, indexes and model warm; every query traced")
    p.add_argument("stories", nargs="*", help="story names or paths to serve (default: every story in fixtures/)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any address "
                   "beyond loopback needs --allow-remote)")
    p.add_argument("--port", type=_whole_number, default=8765, help="TCP port (default 8765; 0: any free port, "
                   "printed on start)")
    p.add_argument("--pipelines", metavar="A,B,...", help="the pipelines served, options and stage settings "
                   "included (default:exchange_share=0.5; default: default and the bare baselines); a request picks "
                   "one by name and can set nothing else about it")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host beyond loopback; every request "
                   "must then carry the token of --token-file")
    p.add_argument("--token-file", metavar="FILE", help="a private file holding the bearer token every request "
                   "must carry (required with --allow-remote)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME", help="a name requests may give "
                   "in Host besides loopback ones and the address bound (repeatable)")
    p.add_argument("--mcp", action="store_true", help="serve MCP over stdin/stdout instead of HTTP (tools: recall, "
                   "list_stories; remember and forget with --writable)")
    p.add_argument("--workers", type=_whole_number, default=1, metavar="N", help="processes answering on the one "
                   "port, each with its own stories, indexes and model (default 1; on two cores, 2 answers two "
                   "queries at once)")
    p.add_argument("--deadline", type=_seconds, default=10.0, metavar="S", help="seconds one request's queries "
                   "may run before it is refused with 503 (default 10)")
    p.add_argument("--read-timeout", type=_seconds, default=10.0, metavar="S", help="seconds a request's head, "
                   "and then its body, may take to arrive (default 10)")
    p.add_argument("--max-connections", type=_whole_number, default=64, metavar="N", help="open connections a "
                   "worker holds; past them a request gets 503 (default 64)")
    p.add_argument("--writable", action="append", default=[], metavar="NAME", help="a story served (JSON Lines) "
                   "that agents may write to with remember and forget (repeatable; default: none, every story "
                   "read-only)")
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's commands by name, one level down (`import` -> `locomo`, `longmemeval`)."""
    return {name: command for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, command in action.choices.items()}


def _flags_of(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """The command's options by the parameter name the library uses: dest -> `--flag`."""
    flags: dict[str, str] = {}
    pending = [subcommands(parser)[command]]
    while pending:  # a command with commands of its own (`import locomo`) lends theirs too
        current = pending.pop()
        pending.extend(subcommands(current).values())
        for action in current._actions:
            longs = [o for o in action.option_strings if o.startswith("--")]
            if longs:
                flags.setdefault(action.dest, longs[0])
    return flags


def with_flags(line: str, flags: dict[str, str]) -> str:
    """A library message in the command line's words: a parameter the library names as
    `name` becomes the command's flag for it (`--name`) when the command has one."""
    return re.sub(r"`([a-z_]+)`", lambda m: flags.get(m.group(1), m.group(0)), line)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once a process: a library caller, a notebook or a test asking many
    commands would otherwise pay its construction (about 10 ms) on every one."""
    return build_parser()


# commands whose work needs no embedding cache: an unusable GARDEN_CACHE does not stop them
# (backup and restore run cases for their verdicts with a private stand-in for it)
NO_CACHE = frozenset({cmd_new_story, cmd_pipelines, cmd_schemas, cmd_import, cmd_traces, cmd_backup, cmd_restore,
                      cmd_generate})


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    flags = _flags_of(parser, args.command)
    try:
        # A bad environment is refused before any work, not after a packet was computed; the
        # doctor alone runs anyway, since a linked folder in the garden home is its finding.
        if args.func is not cmd_doctor:
            check_environment(cache=args.func not in NO_CACHE)
        return args.func(args)
    except GardenError as exc:
        for line in exc.messages:
            # the last guard: whatever a message holds, it prints as one bounded line
            line = with_flags(one_line(line, MESSAGE_LIMIT), flags)
            print(f"garden: {line}" if not line.startswith("  ") else line, file=sys.stderr)
        return exc.status
    except PermissionError as exc:
        # a garden home or store file this user cannot read or write (made by another user,
        # or its mode changed): named in one line, not a traceback
        where = exc.filename or "a file the command needed"
        print(one_line(f"garden: {where}: {exc.strerror or exc}: the user running the garden cannot read or "
                       "write it", MESSAGE_LIMIT), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`garden pipelines | head`): stop quietly, as a shell tool
        # does, with what it expects for SIGPIPE; the rest of the output goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
