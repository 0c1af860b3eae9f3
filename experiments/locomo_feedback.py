"""Does pseudo-relevance feedback find the evidence a question shares no word with?

RM3 (Lavrenko & Croft 2001, "Relevance-based language models"; the interpolated form of
Abdul-Jaleel et al. 2004, "UMass at TREC 2004"): the relevance model is the mixture of
the first `records` documents' language models, each weighted by its share of their
summed BM25 scores, P(t | R) = sum_d w(d) tf(t, d) / |d|; its `terms` most probable
terms, renormalized, are mixed into the query's own term distribution at `mix`:

    q'(t) = (1 - mix) * q(t) + mix * P(t | R),   q(t) = count of t in the query / its length

and the store is ranked again by sum_t q'(t) * bm25(t, d). BM25 here is Lucene's (k1 1.5,
b 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5)), no (k1 + 1) numerator), as `bm25s` scores,
over the documents every retriever of the garden indexes, with the garden's analyzer.

The measure is what a packet can reach: for every answerable LoCoMo question, the share
of its evidence turns shown among the first k records (the turn itself, or a note or view
that cites it), by category, at each k of DEPTHS, for plain BM25 and for each setting of
SETTINGS (records, terms, mix). Every setting is judged on the same questions it is
reported on: the best of the grid is an in-sample figure, an upper bound on what a
setting chosen by leave-one-out would give. The figures are docs/packet.md's ("What did
not help").

    .venv/bin/python experiments/locomo_feedback.py [PATH]

PATH defaults to ../shared/data/locomo. LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from scipy import sparse

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:  # run as a script: the project's packages by name
    sys.path.insert(0, str(PROJECT))

from garden.analyzer import analyze  # noqa: E402
from garden.retrievers.bm25s_ import IDF  # noqa: E402

K1, B = 1.5, 0.75
DEPTHS = (10, 20, 50)
SETTINGS = tuple((records, terms, mix) for records in (3, 5, 10) for terms in (10, 20, 40)
                 for mix in (0.1, 0.2, 0.3, 0.5))


class Index:
    """A store's BM25 term weights and document language models, as sparse matrices."""

    def __init__(self, texts: list[str]):
        tokens = [analyze(t) for t in texts]
        self.vocab: dict[str, int] = {}
        rows, cols, counts = [], [], []
        for d, terms in enumerate(tokens):
            for term, n in Counter(terms).items():
                rows.append(d)
                cols.append(self.vocab.setdefault(term, len(self.vocab)))
                counts.append(n)
        rows, cols, tf = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64), np.array(counts, float)
        shape = (len(texts), len(self.vocab))
        length = np.array([len(t) for t in tokens], float)
        df = np.bincount(cols, minlength=shape[1])
        idf = np.array([IDF["lucene"](len(texts), int(n)) for n in df])  # bm25s's own formula
        norm = K1 * (1 - B + B * length[rows] / max(length.mean(), 1e-9))
        self.weights = sparse.csr_matrix((tf / (tf + norm) * idf[cols], (rows, cols)), shape=shape)
        self.models = sparse.csr_matrix((tf / np.maximum(length[rows], 1), (rows, cols)), shape=shape)

    def query(self, text: str) -> np.ndarray:
        q = np.zeros(len(self.vocab))
        for term in analyze(text):
            if term in self.vocab:
                q[self.vocab[term]] += 1
        return q / q.sum() if q.any() else q

    def scores(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(self.weights @ q).ravel()


def rm3(index: Index, q: np.ndarray, records: int, terms: int, mix: float) -> np.ndarray:
    """The expanded query q' of the module docstring."""
    scores = index.scores(q)
    top = np.argsort(-scores, kind="stable")[:records]
    top = top[scores[top] > 0]
    if not len(top):
        return q
    relevance = np.asarray(index.models[top].T @ (scores[top] / scores[top].sum())).ravel()
    kept = np.argsort(-relevance, kind="stable")[:terms]
    model = np.zeros_like(q)
    model[kept] = relevance[kept]
    return (1 - mix) * q + mix * model / model.sum()


def shown_within(scores: np.ndarray, shows: list[set[str]], evidence: set[str], depths=DEPTHS) -> dict[int, float]:
    """The share of `evidence` shown by the first k scoring records (ties by position), per k."""
    order = np.argsort(-scores, kind="stable")[:max(depths)]
    first: dict[str, int] = {}
    for rank, d in enumerate(order):
        if scores[d] <= 0:
            break
        for turn in shows[d] & evidence:
            first.setdefault(turn, rank)
    return {k: sum(first.get(e, k) < k for e in evidence) / len(evidence) for k in depths}


def measure(conversations, settings=SETTINGS) -> dict:
    """{(setting name, category digit, k): [share per question]} over answerable questions."""
    from garden.pipelines.indexes import documents

    shares = defaultdict(list)
    for conv in conversations:
        story = conv.story
        docs = documents(story)
        index = Index([d.text for d in docs])
        shows = [{d.id, *story.by_id[d.id].sources} for d in docs]
        for question in conv.questions:
            evidence = set(question.evidence)
            if not evidence:
                continue
            q = index.query(question.text)
            runs = {"bm25": q, **{"rm3 %d/%d/%.1f" % s: rm3(index, q, *s) for s in settings}}
            for name, query in runs.items():
                for k, share in shown_within(index.scores(query), shows, evidence).items():
                    shares[(name, question.category[:1], k)].append(share)
    return shares


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default="../shared/data/locomo")
    args = ap.parse_args(argv)
    from garden.errors import GardenError
    from garden.evaluation.locomo import load_conversations

    try:
        conversations = load_conversations(args.path)
    except GardenError as e:
        ap.error(str(e))  # one line naming the path, exit 2
    shares = measure(conversations)
    names = list(dict.fromkeys(name for name, _, _ in shares))
    categories = sorted({c for _, c, _ in shares})
    print("evidence shown within the first k records (answerable questions), k =", ", ".join(map(str, DEPTHS)))
    print("| run | " + " | ".join(f"category {c}" for c in categories) + " | all |")
    print("| --- " * (len(categories) + 2) + "|")
    for name in names:
        cells = [", ".join(f"{np.mean(shares[(name, c, k)]):.3f}" for k in DEPTHS) for c in categories]
        pooled = ", ".join(f"{np.mean([s for c in categories for s in shares[(name, c, k)]]):.3f}" for k in DEPTHS)
        print(f"| {name} | " + " | ".join(cells) + f" | {pooled} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
