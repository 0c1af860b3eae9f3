"""A pilot for a decide gate calibrated on each store: simulated known-item queries as the
store's own reference for "a question this store can answer".

Known-item queries are drawn from the store's own records (Azzopardi, de Rijke and Balog,
SIGIR 2007, "Building simulated queries for known-item topics"): a record is picked
uniformly among the retrievable ones holding at least MIN_WORDS content words, then a few
of its words (2 to 5, 3 to 5 or 1 to 3: each range a variant, `--lengths`), without
replacement, each with probability in proportion to its term's weight in the store
(ln(1 + N / (df + 0.5)), the decide stage's own weight: Azzopardi et al.'s discriminative
term selection), kept in the record's order. The `sentence` variant is nearer a real
question's phrasing (Azzopardi et al.'s noisier query models): one sentence of the record,
each of its content words kept with probability KEEP. Such a query is one the store
can answer, with that record as its answer. Every draw is seeded per store
(`random.Random(f"{seed}/{store}")`), so a store's queries do not depend on the others.

Each simulated query runs through `default` with the answer forced (experiments/locomo_gate.py,
FORCED), which records its support (garden/rerank/decide.py). A store's threshold at level
alpha is then split-conformal: the k-th smallest of its n known-item supports, k =
floor(alpha * (n + 1)), so that a further query exchangeable with the simulated ones is
answered with probability at least 1 - alpha. The guarantee holds only for queries like the
simulated ones; whether real questions are like them is what this pilot measures.

The real questions are scored the same way: on LoCoMo's seven conversations every judged
question (categories 1-4 count as answerable) and each store's foreign negatives
(garden/evaluation/negatives.py, seed 0); on LongMemEval, each haystack's own question and
its foreign negatives, over the whole development sample (`--longmemeval full`) or
tests/test_longmemeval_dev.py's 13-question subset (the default). Beside the known-item
queries, a fixed foreign reference: every query of the shipped cases, each person's name
swapped for one of the store's. Reported:

- for each alpha, and for the shipped single threshold (`answer_at`), the shares of
  answerable questions and of negatives that would be answered, per benchmark (no label is
  used, so no folds);
- fold by fold (LoCoMo's conversations, LongMemEval's haystacks dealt into GROUPS groups by
  type), each store's supports normalized by its own reference (less a known-item quantile;
  its foreign median to 0 and known-item median to 1; less its foreign median), one
  threshold fitted on the other folds by locomo_gate's `threshold_rule`, the held-out shares.

Nothing here is chosen or shipped: it is a measurement to decide whether the reference is
worth building (docs/longmemeval.md, "A pilot: the store's own known-item queries as its
reference").

    .venv/bin/python experiments/known_item_gate.py [--queries 300] [--lengths 3-5,2-5,sentence]
        [--longmemeval subset|full] [--out DIR] [--reuse]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0; LongMemEval: Wu et al., ICLR 2025, MIT; both
read from ../shared/data.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.locomo_gate import FORCED, LONGMEMEVAL_FOREIGN, threshold_rule  # noqa: E402
from garden.pipelines.store_reference import content_words as _content_words, draw_queries  # noqa: E402
from garden.cli import _at_least_one  # noqa: E402
from garden.rerank.decide import ANSWER_AT, vocabulary  # noqa: E402
from garden.retrievers import documents  # noqa: E402

DATA = PROJECT.parent / "shared" / "data"
MIN_WORDS, LENGTHS = 4, (2, 5)
ALPHAS = (0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.2)
FOREIGN = {"subset": 3, "full": LONGMEMEVAL_FOREIGN}   # foreign negatives a LongMemEval haystack is asked
GROUPS = 7   # LongMemEval's folds (experiments/chat_protocol.py): haystacks dealt by type, then id
KEEP = 0.5
SENTENCE = re.compile(r"(?<=[.!?])\s+")
SEED = 0


def known_item_queries(story, count: int, seed: int = SEED,
                       lengths: tuple[int, int] = LENGTHS) -> list[tuple[str, str]]:
    """(record id, query) pairs drawn from `story`'s own records (see the module docstring),
    each of `lengths` words (inclusive)."""
    vocab = vocabulary(story)
    pool = [(d.id, words) for d in sorted(documents(story), key=lambda d: d.id)
            if len(words := _content_words(d.text, vocab)) >= MIN_WORDS]
    return draw_queries(pool, count if pool else 0, random.Random(f"{seed}/{story.story}"), lengths)


def sentence_queries(story, count: int, seed: int = SEED, keep: float = KEEP) -> list[tuple[str, str]]:
    """(record id, query) pairs: a record picked as above, one of its sentences picked
    uniformly, and each content word of it kept with probability `keep` (at least two): a
    query in the record's own phrasing with words missing, nearer a real question's."""
    vocab = vocabulary(story)
    pool = []
    for d in sorted(documents(story), key=lambda d: d.id):
        sentences = [w for part in SENTENCE.split(d.text) if len(w := _content_words(part, vocab)) >= 2]
        if sentences and len(_content_words(d.text, vocab)) >= MIN_WORDS:
            pool.append((d.id, sentences))
    rng = random.Random(f"{seed}/{story.story}/sentence")
    out = []
    for _ in range(count if pool else 0):
        rid, sentences = pool[rng.randrange(len(pool))]
        words = sentences[rng.randrange(len(sentences))]
        kept = [w for w, _ in words if rng.random() < keep]
        if len(kept) < 2:
            kept = [w for w, _ in words[:2]]
        out.append((rid, " ".join(kept)))
    return out


def foreign_reference() -> list[tuple[object, str]]:
    """(story, question) for every query of the shipped cases: fictional questions no
    benchmark store holds the answer to, the same fixed reference for every store."""
    from garden.evaluation.runner import load_cases
    from garden.formats.stories import load_story

    stories, out = {}, {}
    for loaded in load_cases([str(PROJECT / "regression"), str(PROJECT / "challenge")]):
        for q in loaded.queries:
            if q.expect.build_error:
                continue   # a case about a story that must fail to build asks nothing of it
            path = str(q.story_path)
            if path not in stories:
                stories[path] = load_story(q.story_path)
            out.setdefault((path, q.spec_fields["query"]), stories[path])
    out = [(story, text) for (_, text), story in out.items()]
    return sorted(out, key=lambda pair: (pair[0].story, pair[1]))


def conformal_threshold(supports: list[float], alpha: float) -> float:
    """The k-th smallest support, k = floor(alpha * (n + 1)); -inf when k is 0 (too few
    queries for the level: every query answers)."""
    k = math.floor(alpha * (len(supports) + 1))
    return -math.inf if k < 1 else sorted(supports)[k - 1]


def _support(pipeline, story, text: str, as_of) -> float | None:
    from garden.rerank.query import QuerySpec
    from garden.rerank.stages import Settings

    stages = pipeline.run(QuerySpec(story, text, as_of, settings=Settings(answer_at=FORCED))).stages
    return stages["decide"]["support"] if "decide" in stages else None


def store_rows(conversations, negatives, bench: str, count: int, variants: dict, folds: dict) -> list[dict]:
    """Per store: its known-item supports under each query-length variant, the foreign
    reference's supports (each name of a person of the case's story swapped for one of this
    store's, as foreign negatives are made), and its real questions' supports."""
    from garden.evaluation.negatives import people, swap_people
    from garden.pipelines import make_pipeline

    default = make_pipeline("default")
    reference = foreign_reference()
    rows = []
    for conv in conversations:
        story = conv.story
        as_of = max((q.as_of for q in conv.questions if q.as_of), default=None)
        simulated = {name: [s for _, text in draw(story, count)
                            if (s := _support(default, story, text, as_of)) is not None]
                     for name, draw in variants.items()}
        to = people(story)
        foreign = [s for source, text in reference
                   if (s := _support(default, story, swap_people(text, people(source), to), as_of)) is not None]
        questions = []
        for q in conv.questions + negatives.get(story.story, []):
            answerable = bool(q.evidence) and not q.category.startswith("5")
            if not (answerable or not q.evidence):
                continue   # LoCoMo's adversarial category: neither answerable nor a negative here
            questions.append({"answerable": answerable, "support": _support(default, story, q.text, q.as_of)})
        rows.append({"bench": bench, "store": story.story, "fold": folds[story.story], "simulated": simulated,
                     "foreign": foreign, "questions": questions})
        print(f"{bench} {story.story}: {count} simulated a variant, {len(questions)} questions", flush=True)
    return rows


def shares(rows: list[dict], threshold_of) -> dict[str, float]:
    """The shares answered (answerable, negatives) when each store answers at `threshold_of(row)`."""
    answered = {True: [0, 0], False: [0, 0]}
    for row in rows:
        at = threshold_of(row)
        for q in row["questions"]:
            tally = answered[q["answerable"]]
            tally[0] += q["support"] is not None and q["support"] >= at
            tally[1] += 1
    return {"answered": answered[True][0] / max(1, answered[True][1]),
            "negatives answered": answered[False][0] / max(1, answered[False][1]),
            "answerable": answered[True][1], "negatives": answered[False][1]}


def load_stores(sample: str):
    """benchmark -> (conversations, foreign negatives, store -> fold). LongMemEval's `subset`
    is tests/test_longmemeval_dev.py's 13 questions, `full` the whole development sample."""
    from dataclasses import replace

    from experiments.chat_protocol import load, write_development_subset
    from garden.evaluation.negatives import foreign_negatives

    with tempfile.TemporaryDirectory() as scratch:
        chosen = write_development_subset(DATA / "longmemeval" / "longmemeval_s_dev.json.gz",
                                          Path(scratch) / "sample.json", every=8 if sample == "subset" else 1)
        loaded = load(str(DATA / "locomo"), str(chosen))
    locomo, lme = loaded["locomo"], loaded["longmemeval"]
    judged = [replace(c, questions=[q for q in c.questions if q.evidence]) for c in locomo]
    lme_judged = [replace(c, questions=[q for q in c.questions if q.evidence]) for c in lme]
    dealt = sorted(lme, key=lambda c: (c.questions[0].category, c.questions[0].qid))
    return {"locomo": (locomo, foreign_negatives(judged), {c.story.story: c.story.story for c in locomo}),
            "longmemeval": (lme, foreign_negatives([c for c in lme_judged if c.questions], per_store=FOREIGN[sample]),
                            {c.story.story: f"longmemeval-group-{n % GROUPS + 1}" for n, c in enumerate(dealt)})}


def normalized(row: dict, q: dict, scale) -> float:
    if q["support"] is None:
        return -math.inf
    shift, unit = scale(row)
    return (q["support"] - shift) / unit


def two_point(row: dict, variant: str) -> tuple[float, float]:
    """The store's foreign-reference median to 0 and its known-item median to 1."""
    low, high = float(np.median(row["foreign"])), float(np.median(row["simulated"][variant]))
    return low, max(high - low, 1e-6)


def held_out(rows: list[dict], scale) -> dict[str, dict[str, float]]:
    """Each fold decided at the threshold `threshold_rule` fits on the other folds' rows, every
    support mapped by its store's `scale(row)` = (shift, unit) (the per-store normalisation);
    the held-out shares per benchmark."""
    tally = {b: {True: [0, 0], False: [0, 0]} for b in {r["bench"] for r in rows}}
    for fold in sorted({r["fold"] for r in rows}):
        train = [r for r in rows if r["fold"] != fold]
        by_bench = {b: ([normalized(r, q, scale) for r in train if r["bench"] == b for q in r["questions"]
                         if q["answerable"]],
                        [normalized(r, q, scale) for r in train if r["bench"] == b for q in r["questions"]
                         if not q["answerable"]]) for b in sorted(tally)}
        at = threshold_rule(by_bench)
        for r in rows:
            if r["fold"] == fold:
                for q in r["questions"]:
                    counts = tally[r["bench"]][q["answerable"]]
                    counts[0] += normalized(r, q, scale) >= at
                    counts[1] += 1
    return {b: {"answered": t[True][0] / max(1, t[True][1]), "negatives answered": t[False][0] / max(1, t[False][1])}
            for b, t in tally.items()}


def variant_names(text: str) -> list[str]:
    """`--lengths`: comma-separated LOW-HIGH word ranges (1 <= LOW <= HIGH) or `sentence`."""
    names = [v for v in text.split(",") if v]
    for v in names:
        low, _, high = v.partition("-")
        if v != "sentence" and not (low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high)):
            raise argparse.ArgumentTypeError(f"{v!r} is neither LOW-HIGH (1 <= LOW <= HIGH) nor 'sentence'")
    if not names:
        raise argparse.ArgumentTypeError("no variant named")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=_at_least_one("queries a store: a whole number, at least 1"), default=300,
                    help="known-item queries drawn per store")
    ap.add_argument("--lengths", type=variant_names, default="3-5,2-5,sentence",
                    help="the query variants to draw: LOW-HIGH words, or `sentence` (a sentence, words dropped)")
    ap.add_argument("--longmemeval", choices=("subset", "full"), default="subset",
                    help="LongMemEval's 13-question subset or its whole development sample (its 46,000 turns "
                         "encoded once)")
    ap.add_argument("--out", default=str(PROJECT / "experiments" / "out"))
    ap.add_argument("--reuse", action="store_true", help="report again from the rows the last run saved")
    args = ap.parse_args(argv)
    variants = {}
    for v in args.lengths:
        if v == "sentence":
            variants["sentence"] = sentence_queries
        else:
            bounds = tuple(int(n) for n in v.split("-"))
            variants[f"{v} words"] = lambda story, count, bounds=bounds: known_item_queries(story, count,
                                                                                          lengths=bounds)
    saved = Path(args.out) / f"known_item_gate_{args.longmemeval}.json"
    if args.reuse:
        rows = json.loads(saved.read_text(encoding="utf-8"))["rows"]
    else:
        rows = []
        for bench, (conversations, negatives, folds) in load_stores(args.longmemeval).items():
            rows += store_rows(conversations, negatives, bench, args.queries, variants, folds)
    report = {"queries_per_store": args.queries, "rules": {}}
    rules = {f"answer_at {ANSWER_AT.default} (shipped)": lambda row: ANSWER_AT.default}
    rules.update({f"{v}, alpha {a}": (lambda row, a=a, v=v: conformal_threshold(row["simulated"][v], a))
                  for v in variants for a in ALPHAS})
    print(f"{'rule':<28} {'bench':<12} {'answered':>9} {'negatives':>10}")
    for name, rule in rules.items():
        report["rules"][name] = {}
        for bench in ("locomo", "longmemeval"):
            got = shares([r for r in rows if r["bench"] == bench], rule)
            report["rules"][name][bench] = got
            print(f"{name:<28} {bench:<12} {got['answered']:9.3f} {got['negatives answered']:10.3f}")
    benches = ("locomo", "longmemeval")
    real = {b: sorted(q["support"] for r in rows if r["bench"] == b for q in r["questions"]
                      if q["answerable"] and q["support"] is not None) for b in benches}
    report["median_support"] = {"real answerable": {b: v[len(v) // 2] for b, v in real.items() if v}}
    for v in variants:
        got = {b: sorted(s for r in rows if r["bench"] == b for s in r["simulated"][v]) for b in benches}
        report["median_support"][v] = {b: x[len(x) // 2] for b, x in got.items() if x}
    for name, medians in report["median_support"].items():
        print(f"median support, {name}: " + ", ".join(f"{b} {m:.3f}" for b, m in medians.items()))
    # per-store normalisation: a store's support less its known-item median (or low quantile), one
    # threshold over the normalized supports fitted on the other folds, as locomo_gate fits its own
    scales = {"raw support (one threshold)": lambda row: (0.0, 1.0)}
    for v in variants:
        for share in (0.5, 0.1):
            scales[f"less {v} q{share:g}"] = (lambda row, v=v, share=share:
                                             (float(np.quantile(row["simulated"][v], share)), 1.0))
        scales[f"two-point, {v}"] = lambda row, v=v: two_point(row, v)
    scales["less foreign q0.5"] = lambda row: (float(np.median(row["foreign"])), 1.0)
    report["held_out"] = {}
    print(f"held out, fold by fold: {'normalisation':<26} {'bench':<12} {'answered':>9} {'negatives':>10}")
    for name, scale in scales.items():
        report["held_out"][name] = held_out(rows, scale)
        for bench, got in report["held_out"][name].items():
            print(f"{'':<22}{name:<26} {bench:<12} {got['answered']:9.3f} {got['negatives answered']:10.3f}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"report": report, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
