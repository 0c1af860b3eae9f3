"""`garden judge TRACE`: a person adjudicates the distinct questions of a trace.

For each question the pipelines' packets are pooled (the union, deduplicated, as TREC
pools runs), and the person gives a verdict on the question (should it have been answered,
should the garden have asked, should it have stayed silent), a grade for every pooled item
(the answer, relevant, not relevant, forbidden), and the ids of any record that answers but
no pipeline served. Every verdict is saved the moment it is given (see judgments.py); a
second run resumes with what is still unjudged. Answers come from the terminal or, for
scripts and tests, from a file with one answer per line, exactly as they would be typed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from garden._terminal import Progress, counted, shorten, width
from garden.errors import GardenError
from garden.evaluation.judgments import GRADES, Judgments
from garden.evaluation.replay import Replay, replays_from_trace
from garden.pipelines import check_pipeline, make_pipeline
from garden.text import one_line, plural, shown

ITEM_KEYS = {"l": "lead", "r": "relevant", "n": "not", "f": "forbidden"}
VERDICT_KEYS = {"a": "answer", "k": "ask", "s": "silent"}
SKIP, QUIT = ".", "q"
TEXT_SHOWN = 160  # at most this many characters of a record's text shown beside its grade prompt


def text_shown() -> int:
    """Characters of a record's text shown: one line of the terminal under a 4-space indent."""
    return max(20, min(TEXT_SHOWN, width() - 4))


class Stopped(Exception):
    """The person quit, or the answers ran out: everything given so far is saved."""


class Answers:
    """Answers one line at a time. From a terminal a bad answer is asked again; from a
    file it is bad input, named by file and line (the verdicts before it are saved)."""

    def __init__(self, lines: Iterable[str], name: str, interactive: bool, out: Callable[[str], None]):
        self.lines: Iterator[str] = iter(lines)
        self.name, self.interactive, self.out = name, interactive, out
        self.number = 0

    def ask(self, prompt: str, parse: Callable[[str], object]):
        while True:
            self.out(prompt)
            try:
                raw = next(self.lines)
            except StopIteration:
                raise Stopped("the answers ran out") from None
            self.number += 1
            text = raw.strip()
            if text == QUIT:
                raise Stopped("quit")
            try:
                return parse(text)
            except ValueError as exc:
                if not self.interactive:
                    raise GardenError(f"{self.name}:{self.number}: {exc}") from None
                self.out(f"  {exc}; try again")


def parse_choice(keys: dict[str, str]) -> Callable[[str], str | None]:
    def parse(text: str) -> str | None:
        if text == SKIP:
            return None
        word = keys.get(text, text)
        if word not in keys.values():
            raise ValueError(f"answer {shown(text)} is not one of {', '.join(keys)}, {SKIP} (skip) or {QUIT} (quit)")
        return word
    return parse


def parse_missed(known: set[str], pooled: set[str]) -> Callable[[str], dict[str, int]]:
    """`ID[=GRADE], ...`: records that answer but no pipeline served (grade: relevant).
    A pooled record is graded at its own prompt, so its saved grade is never overwritten."""
    def parse(text: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            rid, _, grade = part.partition("=")
            rid, grade = rid.strip(), ITEM_KEYS.get(grade.strip(), grade.strip() or "relevant")
            if rid not in known:
                raise ValueError(f"record {shown(rid)} is not in the story")
            if rid in pooled:
                raise ValueError(f"record {rid} was served: it has its own grade")
            if grade not in GRADES:
                raise ValueError(f"grade {shown(grade)} for {rid} is not one of {', '.join(GRADES)}")
            out[rid] = GRADES[grade]
        return out
    return parse


@dataclass
class Pooled:
    id: str
    served: dict[str, int]  # pipeline -> 1-based position in its packet
    labels: list[str]


def pool(replay: Replay, pipelines: list[str]) -> list[Pooled]:
    """The union of the pipelines' packets, best position first, ties by id."""
    found: dict[str, Pooled] = {}
    # the first question loads each pipeline (a model, its indexes): seconds, shown on a terminal
    for p in counted(pipelines, Progress("judge: asking the pipelines", total=len(pipelines), unit="pipelines")):
        for pos, item in enumerate(make_pipeline(p).run(replay.spec).packet.items, start=1):
            entry = found.setdefault(item.id, Pooled(item.id, {}, list(item.labels)))
            entry.served[p] = pos
    return sorted(found.values(), key=lambda e: (min(e.served.values()), e.id))


@dataclass
class JudgeSummary:
    path: Path
    questions: int
    complete: int
    given: int        # verdicts and grades given in this run
    stopped: str | None

    def lines(self) -> list[str]:
        head = (f"stopped ({self.stopped}): " if self.stopped else "") + \
            f"{plural(self.given, 'verdict')} saved this run; {self.complete} of {self.questions} questions fully " \
            "judged"
        return [head, f"item grades: {self.path} (TREC qrels); question verdicts: "
                      f"{self.path.with_name(self.path.stem + '.questions.jsonl')}"]


def judge(trace: str | Path, judgments: str | Path, answers: Answers, pipelines: list[str] | None = None,
          trace_source: str | None = None, since=None, until=None) -> JudgeSummary:
    """Ask, question by question, what is still unjudged in the trace file (or the folder's
    days in [since, until]); see the module's docstring."""
    trace = Path(trace)
    if not trace.exists():
        raise GardenError(f"{trace}: no such trace file or folder")
    store = Judgments.load(judgments)
    questions = replays_from_trace(trace, trace_source, since=since, until=until, expectations=False).replays
    if not questions:
        raise GardenError(f"{trace}: holds no question to judge")
    if pipelines is None:
        pipelines = sorted({p for r in questions for p in r.traced})
    for p in pipelines:
        check_pipeline(p)
    complete, saved = 0, store.saves
    try:
        for n, replay in enumerate(questions, start=1):
            items = pool(replay, pipelines)
            if is_complete(store, replay.question_id, items):
                complete += 1
                continue
            judge_question(store, replay, items, n, len(questions), answers)
            complete += is_complete(store, replay.question_id, items)
    except Stopped as stop:
        # counted by the store as each answer is saved: a quit mid-question still counts
        # what that question was given
        return JudgeSummary(store.path, len(questions), complete, store.saves - saved, str(stop))
    return JudgeSummary(store.path, len(questions), complete, store.saves - saved, None)


def is_complete(store: Judgments, qid: str, items: list[Pooled]) -> bool:
    entry = store.questions.get(qid, {})
    return (entry.get("verdict") is not None and entry.get("missed_asked", False)
            and all(store.grade(qid, item.id) is not None for item in items))


def judge_question(store: Judgments, replay: Replay, items: list[Pooled], n: int, total: int,
                   answers: Answers) -> None:
    """Ask what is still unjudged of one question; every answer is saved as it comes (the
    store counts each one)."""
    qid, spec, out = replay.question_id, replay.spec, answers.out
    about = {"story": spec.story.name, "query": spec.query, "as_of": spec.as_of.isoformat(), "case": replay.case}
    # a trace is text anyone may have written: escape sequences in it are shown, never obeyed;
    # the question is named as every command names it (its number in the trace and its qid)
    out(one_line(f"{replay.name()}, {n} of {total} to judge ({replay.trace} line {replay.line}): "
                 f"{spec.story.name}, as of {spec.as_of.isoformat()}"
                 + (f", from case {replay.case}" if replay.case else ", a free query")))
    out(f"  {one_line(spec.query)}")
    if store.verdict(qid) is None:
        verdict = answers.ask(f"  should it [a]nswer, as[k] the user, or stay [s]ilent? ({SKIP} skip, {QUIT} quit)",
                              parse_choice(VERDICT_KEYS))
        if verdict is not None:
            store.set_question(qid, about, verdict=verdict)
    for item in items:
        if store.grade(qid, item.id) is not None:
            continue
        record = spec.story.by_id.get(item.id)
        served = ", ".join(f"{p} #{pos}" for p, pos in sorted(item.served.items()))
        out(f"  {item.id} [{record.kind if record else '?'}] served by {served}; labels: "
            f"{', '.join(item.labels) or 'none'}")
        shown = (record.title + ": " if record and record.title else "") + (record.text or "" if record else "")
        out(f"    {shorten(shown, text_shown())}")
        grade = answers.ask(f"    grade: [l]ead, [r]elevant, [n]ot relevant, [f]orbidden ({SKIP} skip, {QUIT} quit)",
                            parse_choice(ITEM_KEYS))
        if grade is not None:
            store.set_grade(qid, item.id, GRADES[grade])
    if not store.questions.get(qid, {}).get("missed_asked"):
        missed = answers.ask("  unserved records that answer: ID[=grade], comma-separated (empty: none)",
                             parse_missed(set(spec.story.by_id), {i.id for i in items}))
        store.set_missed(qid, about, missed)  # the grades and the mark in one write


def _say(line: str) -> None:
    from garden._terminal import echo

    echo([line])


def answers_from(path: str | None, out: Callable[[str], None] = _say) -> Answers:
    """Answers from a file (`--answers`), else from standard input; only a terminal is
    asked again after a bad answer. What is asked is wrapped to the terminal's width."""
    if path is None:
        return Answers(sys.stdin, "<stdin>", sys.stdin.isatty(), out)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GardenError(f"{path}: cannot read answers: {getattr(exc, 'strerror', None) or exc}") from None
    return Answers(lines, str(path), False, out)

