"""LongMemEval's retrieval measures as its authors define them, so that a garden figure can
stand beside a published one (Wu et al., ICLR 2025, "LongMemEval: Benchmarking Chat
Assistants on Long-Term Interactive Memory"; the release's retrieval evaluation, MIT).

They differ from the garden's own (ir-measures) in three ways that move numbers:

- the discount: DCG@k = rel_1 + sum_{i=2..k} rel_i / log2(i), so the second document is
  not discounted at all (trec_eval divides rel_i by log2(i + 1));
- the ideal: the relevance of every document of the *corpus* (the question's retrievable
  haystack), sorted, cut at k; relevance is binary;
- the session level of a turn ranking: each turn stands for its session, k grows until the
  top k turns cover k distinct sessions (or the corpus ends), and the three measures are
  taken over the turns at that depth, each turn relevant when its session is. A ranking of
  sessions (a retriever that ranks sessions, as `garden compare` now scores the session
  level, from each pipeline's ranking of sittings) is scored by `measures` directly, over
  the corpus of sessions.

`recall_any@k`: some gold document in the top k; `recall_all@k`: every one. The authors
report k in KS, at session and turn level. Their gold (`author_gold`): turn level, the user
turns marked `has_answer` (only user turns are indexed); session level, the evidence
sessions (ids beginning `answer_`) holding such a turn; an abstention question, or one with
no user-side evidence turn, is left out.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping, Sequence

KS = (1, 3, 5, 10, 30, 50)
ABSTENTION_SUFFIX = "_abs"
EVIDENCE_PREFIX = "answer_"


def _dcg(rels: Sequence[float]) -> float:
    return sum(rel if i == 1 else rel / math.log2(i) for i, rel in enumerate(rels, 1))


def dcg(rels: Sequence[float], k: int) -> float:
    """rel_1 + sum_{i=2..k} rel_i / log2(i), over the first k relevances given."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return _dcg(list(rels)[:k])


def ndcg_any(ranking: Sequence[str], gold: Iterable[str], corpus: Sequence[str], k: int) -> float:
    """DCG@k of the ranking over DCG@k of the corpus's relevances sorted best first (0 when
    the corpus holds no gold document). A ranked id is relevant when it is gold."""
    gold = set(gold)
    ideal = dcg(sorted((1.0 if doc in gold else 0.0 for doc in corpus), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if doc in gold else 0.0 for doc in ranking], k) / ideal


def recall_any(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1 when some gold document is in the top k, else 0."""
    top = set(ranking[:k])
    return float(any(doc in top for doc in gold))


def recall_all(ranking: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1 when every gold document is in the top k, else 0 (1 for an empty gold, as
    Python's `all` of nothing is true: the authors leave such questions out first)."""
    top = set(ranking[:k])
    return float(all(doc in top for doc in gold))


def measures(ranking: Sequence[str], gold: Iterable[str], corpus: Sequence[str], k: int) -> dict[str, float]:
    gold = list(gold)
    return {f"recall_any@{k}": recall_any(ranking, gold, k), f"recall_all@{k}": recall_all(ranking, gold, k),
            f"ndcg_any@{k}": ndcg_any(ranking, gold, corpus, k)}


def session_depth(ranking: Sequence[str], session_of: Callable[[str], str], k: int, corpus_size: int) -> int:
    """The smallest depth from k at which the ranked turns cover k distinct sessions. The
    search stops once the depth passes the corpus's size (at corpus_size + 1 when too few
    sessions exist, at k itself when k is already past it), as the authors' loop does."""
    depth = k
    while depth <= corpus_size and len({session_of(t) for t in ranking[:depth]}) < k:
        depth += 1
    return depth


def turn_ranking_at_session_level(ranking: Sequence[str], gold_turns: Iterable[str], corpus: Sequence[str],
                                  session_of: Callable[[str], str], k: int) -> dict[str, float]:
    """The three measures at session level for a ranking of turns (see the module docstring);
    keys name `k`, the number of sessions asked for, not the depth reached."""
    sessions = [session_of(t) for t in ranking]
    gold = {session_of(t) for t in gold_turns}
    depth = session_depth(ranking, session_of, k, len(corpus))
    got = measures(sessions, gold, [session_of(t) for t in corpus], depth)
    return {name.replace(f"@{depth}", f"@{k}"): value for name, value in got.items()}


def author_gold(record: Mapping) -> tuple[list[str], list[tuple[int, int]]] | None:
    """(evidence session ids, (session index, turn index) of each gold user turn) of a
    LongMemEval question record by the authors' rules, or None when they leave it out."""
    if str(record["question_id"]).endswith(ABSTENTION_SUFFIX):
        return None
    answer_sessions = set(record["answer_session_ids"])
    sessions, turns = [], []
    for s, (sid, session) in enumerate(zip(record["haystack_session_ids"], record["haystack_sessions"])):
        if sid not in answer_sessions or not str(sid).startswith(EVIDENCE_PREFIX):
            continue
        marked = [t for t, turn in enumerate(session) if turn.get("role") == "user" and turn.get("has_answer")]
        if marked:
            if sid not in sessions:
                sessions.append(sid)
            turns += [(s, t) for t in marked]
    return (sessions, turns) if turns else None
