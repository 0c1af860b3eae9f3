"""The folds and the choose-then-hold-out protocol, written once.

Folds: LoCoMo's conversations, one a fold; LongMemEval's judged questions sorted by type,
then id, and dealt into GROUPS groups in turn (so every group holds every type). Together
fourteen folds.

The protocol (leave one fold out): for each fold in turn, a choice is made on the other
folds alone, and the held-out fold is scored with it; the held-out figures together are
the honest ones, each question scored by a choice its fold did not see.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence, TypeVar

C = TypeVar("C")
F = TypeVar("F", bound=Hashable)
GROUPS = 7


def deal(items: Iterable, key: Callable, groups: int = GROUPS) -> list[tuple[object, int]]:
    """(item, its group) for `items` sorted by `key`, dealt to `groups` groups in turn."""
    return [(item, n % groups) for n, item in enumerate(sorted(items, key=key))]


def folds_of(bench: str, conversations) -> dict[str, str]:
    """qid -> its fold, for the judged questions: a LoCoMo conversation's name, or one of
    GROUPS LongMemEval groups (`longmemeval-group-1` ...)."""
    judged = [(c, q) for c in conversations for q in c.questions if q.evidence]
    if bench == "locomo":
        return {q.qid: c.story.story for c, q in judged}
    return {q.qid: f"longmemeval-group-{k + 1}" for q, k in deal((q for _, q in judged),
                                                                  key=lambda q: (q.category, q.qid))}


def choose_then_hold_out(folds: Sequence[F], choose: Callable[[list[F]], C]) -> list[tuple[F, C]]:
    """(fold, what `choose` picked given every other fold), for each fold in the order given."""
    return [(held, choose([f for f in folds if f != held])) for held in folds]


def hold_out_questions(folds: dict[str, dict[str, str]],
                       choose: Callable[[dict[str, list[str]]], C]) -> tuple[list[tuple[str, C]], dict[str, dict]]:
    """The protocol over questions in folds (benchmark -> qid -> fold), the folds in name
    order: `choose` gets benchmark -> the training questions; returned, (fold, choice) per
    fold and benchmark -> qid -> the choice its fold was scored by."""
    names = sorted({f for per in folds.values() for f in per.values()})

    def training(others: list[str]) -> C:
        kept = set(others)
        return choose({b: [q for q, f in per.items() if f in kept] for b, per in folds.items()})
    chosen = choose_then_hold_out(names, training)
    by_fold = dict(chosen)
    held = {b: {q: by_fold[f] for q, f in per.items()} for b, per in folds.items()}
    return chosen, held
