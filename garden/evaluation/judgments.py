"""Judgments a person made on a trace's questions: item grades and question verdicts.

Two files side by side. The item grades are TREC qrels (``qid 0 docid grade``, one line
each), so any TREC tool reads them; the grades are 2 (the answer: it should lead), 1
(relevant), 0 (judged not relevant) and -1 (forbidden: serving it is a fault). The
question verdicts sit beside them in ``<stem>.questions.jsonl``: per question what should
have happened (``answer``, ``ask`` or ``silent``), and enough of the question to read the
file without the trace.

A qid is the question's content id (`replay.question_id`), so judgments made on one day's
trace judge the same question in any other trace. Both files are rewritten whole, through a
temporary file and a rename, after every single verdict: a crash or an interrupt loses at
most the verdict being typed, never one already saved. A file that does not read is refused
with its line and field, never overwritten.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from garden.formats.layout import JUDGMENTS_FOLDER
from garden.derived.home import write_whole
from garden.errors import GardenError
from garden.text import shown

GRADES = {"lead": 2, "relevant": 1, "not": 0, "forbidden": -1}
GRADE_NAMES = {v: k for k, v in GRADES.items()}
VERDICTS = ("answer", "ask", "silent")
QUESTION_FIELDS = {"qid", "verdict", "missed_asked", "story", "query", "as_of", "case"}


def questions_path(qrels: Path) -> Path:
    """The question verdicts' file beside a qrels file: `x.qrels` -> `x.questions.jsonl`."""
    return qrels.with_name(qrels.stem + ".questions.jsonl")


def default_judgments(trace: Path) -> Path:
    """Judgments are a person's work, durable: they live in the project's `judgments/`
    folder, never beside the trace in the derived folder that may be deleted."""
    return Path(JUDGMENTS_FOLDER) / f"{trace.stem}.qrels"


@dataclass
class Judgments:
    path: Path
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    questions: dict[str, dict] = field(default_factory=dict)
    saves: int = 0   # verdicts and grades given and saved through this object (a question's verdict, a grade)

    @classmethod
    def load(cls, path: str | Path, must_exist: bool = False) -> "Judgments":
        path = Path(path)
        out = cls(path)
        if not path.exists() and not questions_path(path).exists():
            if must_exist:
                raise GardenError(f"{path}: no such judgments file (make one with `garden judge`)")
            return out
        out.qrels = read_qrels(path) if path.exists() else {}
        out.questions = read_questions(questions_path(path)) if questions_path(path).exists() else {}
        return out

    def grade(self, qid: str, rid: str) -> int | None:
        return self.qrels.get(qid, {}).get(rid)

    def verdict(self, qid: str) -> str | None:
        return self.questions.get(qid, {}).get("verdict")

    def judged(self, qid: str) -> bool:
        """The question has a verdict or a graded item: it can judge a pipeline."""
        return self.verdict(qid) is not None or bool(self.qrels.get(qid))

    def set_grade(self, qid: str, rid: str, grade: int) -> None:
        self.qrels.setdefault(qid, {})[rid] = grade
        self.save()
        self.saves += 1

    def set_question(self, qid: str, about: dict, **values) -> None:
        entry = self.questions.setdefault(qid, {"qid": qid, "verdict": None, "missed_asked": False, **about})
        entry.update(values)
        self.save()
        self.saves += "verdict" in values

    def set_missed(self, qid: str, about: dict, missed: dict[str, int]) -> None:
        """Records that answer but no pipeline served, graded, and the question marked as
        asked for them, in one write."""
        for rid, grade in missed.items():
            self.qrels.setdefault(qid, {})[rid] = grade
        self.set_question(qid, about, missed_asked=True)
        self.saves += len(missed)

    def save(self) -> None:
        qrels = "".join(f"{qid} 0 {rid} {grade}\n" for qid in sorted(self.qrels)
                        for rid, grade in sorted(self.qrels[qid].items()))
        questions = "".join(json.dumps(self.questions[q], ensure_ascii=False, sort_keys=True) + "\n"
                            for q in sorted(self.questions))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # grades first: torn between the two renames, a question is at worst asked again
        # for what it already holds, never marked done without its grades
        _replace(self.path, qrels)
        _replace(questions_path(self.path), questions)


def _replace(path: Path, text: str) -> None:
    write_whole(path, text.encode("utf-8"), prefix=f".{path.name}.")


def _lines(path: Path) -> list[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GardenError(f"{path}: cannot read judgments: {getattr(exc, 'strerror', None) or exc}") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels with the garden's grades; every problem is refused with file:line."""
    out: dict[str, dict[str, int]] = {}
    for n, line in _lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise GardenError(f"{path}:{n}: a qrels line is 'qid 0 docid grade' (got {len(parts)} fields)")
        qid, _, rid, grade_text = parts
        try:
            grade = int(grade_text)
        except ValueError:
            grade = None
        if grade not in GRADE_NAMES:
            raise GardenError(f"{path}:{n}: field grade: {shown(grade_text)} is not one of 2, 1, 0, -1")
        if rid in out.get(qid, {}):
            raise GardenError(f"{path}:{n}: {qid} {rid} is graded twice; keep one line")
        out.setdefault(qid, {})[rid] = grade
    return out


def read_questions(path: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for n, line in _lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GardenError(f"{path}:{n}: not a JSON line: {exc.msg}") from None
        if not isinstance(data, dict) or not isinstance(data.get("qid"), str):
            raise GardenError(f"{path}:{n}: field qid: a question verdict is a JSON object with a qid")
        unknown = sorted(set(data) - QUESTION_FIELDS)
        if unknown:
            raise GardenError(f"{path}:{n}: field {unknown[0]}: not a question-verdict field")
        if data.get("verdict") not in (None, *VERDICTS):
            raise GardenError(f"{path}:{n}: field verdict: {shown(data['verdict'])} is not one of "
                              f"{', '.join(VERDICTS)}")
        if not isinstance(data.get("missed_asked", False), bool):
            raise GardenError(f"{path}:{n}: field missed_asked: must be true or false")
        if data["qid"] in out:
            raise GardenError(f"{path}:{n}: question {data['qid']} appears twice; keep one line")
        out[data["qid"]] = data
    return out
