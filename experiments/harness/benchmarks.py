"""Where the benchmarks are read, given one way: `--locomo`, `--longmemeval`, `--vaswani`.

Each defaults to its place under ../shared/data (the project's parent), where the real
data lives and from where it is never copied in; a path that does not exist is refused in
one line naming it, before anything is read. LoCoMo: Maharana et al., ACL 2024, CC BY-NC
4.0. LongMemEval: Wu et al., ICLR 2025, MIT. Vaswani: the collection's own judgments.
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
DATA = PROJECT.parent / "shared" / "data"
DEFAULTS = {"locomo": DATA / "locomo", "longmemeval": DATA / "longmemeval" / "longmemeval_s_dev.json.gz",
            "vaswani": DATA / "vaswani"}
WHAT = {"locomo": "LoCoMo: a conversation file or a folder of them",
        "longmemeval": "LongMemEval: a released file (.json or .json.gz)",
        "vaswani": "Vaswani: the collection's folder"}
OUT = PROJECT / "experiments" / "out"
NONE = "none"   # what a benchmark an experiment may leave out is given as
DEPTH = {"locomo": 100, "longmemeval": 1000}   # what `garden compare` ranks each chat benchmark to
MEASURES = ("nDCG@10", "Success@5")            # what the chat experiments judge a ranking by


def arguments(parser: argparse.ArgumentParser, benchmarks: tuple[str, ...], argv: list[str] | None = None, *,
              defaults: dict[str, Path] | None = None, reuse: str | None = None, out: bool = True,
              optional: tuple[str, ...] = ()) -> argparse.Namespace:
    """`parser`'s arguments with an option per benchmark (DEFAULTS, or `defaults`), `--out`
    (where rows and results go) and, when `reuse` says what it reads again, `--reuse`.
    A benchmark whose path does not exist is refused in one line (exit 2), unless `--reuse`
    reads saved rows instead or it is one of `optional` given as `none`."""
    chosen = {**DEFAULTS, **(defaults or {})}
    for name in benchmarks:
        parser.add_argument(f"--{name}", default=str(chosen[name]),
                            help=WHAT[name] + (f", or {NONE}" if name in optional else "")
                            + f" (default {chosen[name]})")
    if out:
        parser.add_argument("--out", default=str(OUT), help=f"where rows and results are saved (default {OUT})")
    if reuse is not None:
        parser.add_argument("--reuse", action="store_true", help=reuse)
    args = parser.parse_args(argv)
    for name in benchmarks:
        path = getattr(args, name)
        if getattr(args, "reuse", False) or (name in optional and path.lower() == NONE):
            continue
        if not Path(path).exists():
            parser.error(f"--{name}: no data at {path}")
    return args


def load_chats(locomo: str | Path, longmemeval: str | Path) -> dict[str, list]:
    """benchmark -> its conversations (each with its judged questions): LoCoMo's, and
    LongMemEval's haystacks that have a judged question."""
    from garden.evaluation.locomo import load_conversations

    return {"locomo": load_conversations(locomo), "longmemeval": longmemeval_conversations(longmemeval)}


def longmemeval_conversations(path: str | Path) -> list:
    """LongMemEval's haystacks that have a judged question, each a conversation."""
    from garden.evaluation.longmemeval import conversation_of
    from garden.formats.longmemeval import read_built

    return [c for c in (conversation_of(b) for b in read_built(path)[1]) if c.questions]


def write_development_subset(sample: str | Path, out: str | Path, every: int = 8) -> Path:
    """LongMemEval's development sample sorted by type, then id, and every `every`-th question
    kept (tests/test_longmemeval_dev.py's fixed rule; `every` 1 keeps them all), written to
    `out` in the released layout."""
    opener = gzip.open if str(sample).endswith(".gz") else open
    with opener(sample, "rt", encoding="utf-8") as fh:
        questions = json.load(fh)
    questions.sort(key=lambda q: (q["question_type"], q["question_id"]))
    Path(out).write_text(json.dumps(questions[::every]), encoding="utf-8")
    return Path(out)


def text_samples(count: int, locomo: str | Path, vaswani: str | Path, longmemeval: str | Path) -> dict[str, list[str]]:
    """`count` texts of each kind, spread evenly over the source, the same every run: LoCoMo
    turns, Vaswani abstracts, LongMemEval's distinct turns (either role)."""
    from garden.evaluation.locomo import load_conversations
    from garden.formats.corpora import load_collection

    turns = [r.text for c in load_conversations(locomo) for r in c.story.records if r.kind == "source"]
    passages = [d.text for d in load_collection(vaswani).docs]
    with gzip.open(longmemeval, "rt", encoding="utf-8") as fh:
        chat = sorted({t["content"] for q in json.load(fh) for s in q["haystack_sessions"] for t in s
                       if t["content"].strip()})
    kinds = {"LoCoMo turns": turns, "Vaswani passages": passages, "LongMemEval turns": chat}
    return {kind: texts[:: max(1, len(texts) // count)][:count] for kind, texts in kinds.items()}


def at_least_one(what: str):
    """An argparse type: a whole number of at least 1; anything else refused in one line
    saying what it counts (`what`) and what was given."""
    def parse(text: str) -> int:
        value = int(text) if text.strip().isdigit() else 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}")
        return value
    return parse
