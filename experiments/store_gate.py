"""The decide stage's gate calibrated on each store: its support's weights, the store's level
and the threshold, chosen together on both development benchmarks.

What a support is worth depends on the store (garden/rerank/decide.py): one threshold fitted
on LoCoMo answers 0.742 of LongMemEval's questions, and refitted on both it answers half of
LoCoMo's foreign negatives (docs/longmemeval.md, "The decision on both benchmarks"). Each
store now has a reference of its own (garden/pipelines/store_reference.py: its known-item
queries and a fixed set of fictional foreign questions, run through `default`), and the
threshold is set on the support less the store's level,

    level = a_known median(known-item supports) + a_foreign q90(foreign supports).

Three kinds of store, each judged by its benchmark's evidence turns:

- `locomo`: LoCoMo's seven conversations as released (Maharana et al., ACL 2024, CC BY-NC
  4.0), with the observations and session summaries the benchmark generated from them;
  answerable: the judged questions of categories 1-4; negatives: 105 foreign questions a
  conversation (garden/evaluation/negatives.py, seed 0);
- `locomo-raw`: the same conversations as raw chat logs (turns only: their observations and
  summaries left out, in a scratch copy), the same questions and negatives: a store of short
  chat lines with nothing written in a question's register, as a person's own chats are;
- `longmemeval`: LongMemEval's 98-question sample (Wu et al., ICLR 2025, MIT), each haystack a
  store; answerable: its own question (93); negatives: the 5 abstention questions and
  LONGMEMEVAL_FOREIGN foreign questions a haystack.

Every question runs once through `default` with the answer forced, recording the support's
parts (ln top, held, known, ln second), the lanes' largest standout ratio, the packet's
evidence coverage and precision (as served whenever answered), and `bm25s`'s packet for the
same question. The folds are experiments/harness/folds.py's fourteen: LoCoMo's conversations
(a conversation's two forms in one fold) and LongMemEval's questions dealt into seven groups
by type. Holding each fold out in turn, on the other thirteen:

1. the support's weights: a logistic regression of answerable against negatives (L2, C 1;
   each kind of store weighing the same);
2. the level's weights (a_known, a_foreign) from LEVEL_GRID, and with each the threshold
   `answer_at` by experiments/harness/gate.py's answer-first rule (the lowest calibrated
   support at which every kind answers at most 24% of its negatives, unless a kind would
   then answer fewer than 91% of its answerable questions); the point whose threshold gives
   the best mean over the kinds of (answered - negatives answered) is chosen;
3. the threshold clamped into what keeps every shipped regression case's verdict.

The held-out fold is decided with its fold's choices; the held-out figures together are the
honest ones. Reported beside them, the same way: the gate shipped before (LoCoMo's weights,
one threshold), one threshold refitted without a level, each reference alone, and the
choice fitted on LoCoMo and LongMemEval only (`locomo-raw` held out of every fit). Packet
coverage per kind: never silent, as the gate decides, and `bm25s`'s.

    .venv/bin/python experiments/store_gate.py [--locomo PATH] [--longmemeval FILE] [--out DIR] [--reuse]

`--reuse` refits from the rows the last run saved.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments, load_chats  # noqa: E402
from experiments.harness.chats import raw_chat_logs  # noqa: E402
from experiments.harness.folds import choose_then_hold_out, folds_of  # noqa: E402
from experiments.harness.gate import (FORCED, LONGMEMEVAL_FOREIGN, NEGATIVE_CAP, negatives_in_folds,  # noqa: E402
                                      standout_ratio, threshold_rule)
from experiments.harness.results import write_json  # noqa: E402
from experiments.harness.timing import timed  # noqa: E402
from garden.rerank.decide import PARTS, features  # noqa: E402

KINDS = ("locomo", "locomo-raw", "longmemeval")
LEVEL_GRID = [(a, f) for a in (0.0, 0.5, 1.0, 1.5, 2.0) for f in (0.0, 0.5, 1.0, 1.5, 2.0)]
ANSWER_TARGET = 0.92   # the answer-first rule's floor on every kind's answerable questions
STATISTICS = {   # a reference's statistics, chosen by name: what the known items and the foreign questions say
    "mean": np.mean,
    "median": lambda v: float(np.quantile(v, 0.5)),
    "q75": lambda v: float(np.quantile(v, 0.75)),
    "q90": lambda v: float(np.quantile(v, 0.9)),
}
SHIPPED_STATISTICS = ("mean", "q90")
OLD_WEIGHTS, OLD_BIAS, OLD_ANSWER_AT = (2.9, 3.45, 2.32, 0.0), -1.67, -0.1   # the gate shipped before


# --- the stores -----------------------------------------------------------------------


def stores(locomo: str, longmemeval: str) -> dict[str, tuple[list, dict, dict]]:
    """kind -> (conversations, store -> its negatives, qid -> fold), from LoCoMo's folder
    and LongMemEval's file."""
    from garden.evaluation.locomo import load_conversations

    loaded = load_chats(locomo, longmemeval)
    with tempfile.TemporaryDirectory() as scratch:
        raw = load_conversations(raw_chat_logs(Path(locomo), Path(scratch)))
    out = {}
    for kind, convs in (("locomo", loaded["locomo"]), ("locomo-raw", raw), ("longmemeval", loaded["longmemeval"])):
        bench = "longmemeval" if kind == "longmemeval" else "locomo"
        negatives, folds = negatives_in_folds(convs, folds_of(bench, convs),
                                              per_store=LONGMEMEVAL_FOREIGN if bench == "longmemeval" else None)
        out[kind] = (convs, negatives, folds)
    return out


def collect(kind: str, conversations, negatives, folds) -> list[dict]:
    """One row per store: its reference's parts, and one row per question (see the module
    docstring)."""
    from garden.evaluation.packets import packet_row
    from garden.pipelines import make_pipeline
    from garden.pipelines.store_reference import build_reference
    from garden.rerank.query import QuerySpec
    from garden.rerank.stages import Settings

    default, bm25s = make_pipeline("default"), make_pipeline("bm25s")
    rows = []
    for conv in conversations:
        story = conv.story
        built, reference = timed(lambda: build_reference(default, story))
        questions = []
        for q in conv.questions + negatives.get(story.story, []):
            answerable = bool(q.evidence)
            outcome = default.run(QuerySpec(story, q.text, q.as_of, settings=Settings(answer_at=FORCED)))
            stages = outcome.stages
            # LoCoMo's adversarial category counts in the packet's coverage, not in the share answered
            core = answerable and not (kind != "longmemeval" and q.category.startswith("5"))
            row = {"qid": q.qid, "fold": folds[q.qid], "answerable": answerable, "core": core,
                   "negative": q.negative,
                   "x": [float(stages["decide"][p]) for p in PARTS] if "decide" in stages else None,
                   "ratio": standout_ratio(stages) if "decide" in stages else 0.0}
            if answerable:
                served = packet_row(q, outcome.packet, story)
                base = packet_row(q, bm25s.run(QuerySpec(story, q.text, q.as_of)).packet, story)
                row.update(covered=served.covered, precision=served.precision,
                           bm25s_covered=base.covered, bm25s_precision=base.precision)
            questions.append(row)
        rows.append({"kind": kind, "store": story.story, "known": reference.known.tolist(),
                     "foreign": reference.foreign.tolist(), "seconds": built, "questions": questions,
                     "records": len(story.records)})
        print(f"{kind} {story.story}: reference {len(reference.known)} + {len(reference.foreign)} queries in "
              f"{built:.1f} s, {len(questions)} questions", flush=True)
    return rows


# --- the protocol ------------------------------------------------------------------


class Table:
    """The collected rows as arrays: one entry per question, and per store its reference."""

    def __init__(self, rows: list[dict]):
        self.stores = rows
        qs = [(i, q) for i, r in enumerate(rows) for q in r["questions"]]
        self.store = np.array([i for i, _ in qs])
        self.kind = np.array([rows[i]["kind"] for i, _ in qs])
        fold = [q["fold"] for _, q in qs]
        self.fold = np.array(fold)
        self.answerable = np.array([q["answerable"] for _, q in qs])
        self.core = np.array([q["core"] for _, q in qs])
        # a question its own store declares unanswerable (LongMemEval's abstention questions)
        self.abstention = np.array([q["negative"] == "declared" for _, q in qs])
        self.gated = np.array([q["x"] is not None for _, q in qs])
        self.x = features([q["x"] if q["x"] is not None else [0, 0, 0, 0] for _, q in qs])
        self.ratio = np.array([q["ratio"] for _, q in qs])

        def get(k):
            return np.array([q.get(k) if q.get(k) is not None else np.nan for _, q in qs], dtype=float)
        self.covered, self.precision = get("covered"), get("precision")
        self.bm25s_covered, self.bm25s_precision = get("bm25s_covered"), get("bm25s_precision")
        self.known = [features(r["known"]) for r in rows]
        self.foreign = [features(r["foreign"]) for r in rows]

    def supports(self, w, b) -> np.ndarray:
        return np.where(self.gated, self.x @ w + b, -np.inf)

    def levels(self, w, b, a_known: float, a_foreign: float, stats=SHIPPED_STATISTICS) -> np.ndarray:
        """Each store's level under these weights; the median of the others' for a store
        without a reference (the global level)."""
        out = np.array([level(k, f, w, b, a_known, a_foreign, stats) for k, f in zip(self.known, self.foreign)])
        missing = np.isnan(out)
        out[missing] = np.median(out[~missing])
        return out


def level(known, foreign, w, b, a_known: float, a_foreign: float, stats=SHIPPED_STATISTICS) -> float:
    """A store's level from its reference's feature rows (nan without a reference)."""
    if not (len(known) and len(foreign)):
        return math.nan
    return float(a_known * STATISTICS[stats[0]](known @ w + b) + a_foreign * STATISTICS[stats[1]](foreign @ w + b))


def fit_weights(t: Table, mask: np.ndarray, kinds) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    use = mask & t.gated & np.isin(t.kind, kinds) & (t.core | ~t.answerable)
    counts = {k: max(1, int(np.sum(use & (t.kind == k)))) for k in kinds}
    weight = np.array([1.0 / counts[k] if k in counts else 0.0 for k in t.kind])   # each kind weighs the same
    model = LogisticRegression(C=1.0, max_iter=2000).fit(t.x[use], t.answerable[use],
                                                       sample_weight=weight[use] * use.sum())
    return model.coef_[0], float(model.intercept_[0])


def rule(score: np.ndarray, t: Table, mask: np.ndarray, kinds, target: float = ANSWER_TARGET) -> float:
    """The answer-first threshold (experiments/harness/gate.py) over these kinds' rows under `mask`."""
    return threshold_rule({k: (list(score[mask & (t.kind == k) & t.core]),
                               list(score[mask & (t.kind == k) & ~t.answerable])) for k in kinds},
                          answer_target=target, negative_cap=NEGATIVE_CAP)


def objective(score, t: Table, mask, kinds, at: float) -> float:
    said = score >= at
    return float(np.mean([said[mask & (t.kind == k) & t.core].mean() - said[mask & (t.kind == k)
                                                                                & ~t.answerable].mean()
                          for k in kinds]))


def choose_level(t: Table, w, b: float, mask: np.ndarray, grid, fit_on, stats=SHIPPED_STATISTICS,
                 target: float = ANSWER_TARGET, bounds=None, at: float | None = None) -> tuple:
    """The level weights of `grid` that serve `fit_on` best on the rows under `mask`: each
    pair's calibrated support thresholded by the rule (or at a fixed `at`), clamped into
    the cases' `bounds`; (objective, (a_known, a_foreign), threshold, calibrated supports,
    the rule's threshold, the bounds or None)."""
    score = t.supports(w, b)
    best = None
    for a_known, a_foreign in grid:
        calibrated = score - t.levels(w, b, a_known, a_foreign, stats)[t.store]
        by_rule = rule(calibrated, t, mask, fit_on, target) if at is None else at
        limits = bounds(w, b, a_known, a_foreign, stats) if bounds is not None else None
        threshold = by_rule if limits is None else min(max(by_rule, math.nextafter(limits[0], math.inf)), limits[1])
        value = objective(calibrated, t, mask, fit_on, threshold)
        if best is None or value > best[0] + 1e-12:
            best = (value, (a_known, a_foreign), threshold, calibrated, by_rule, limits)
    return best


def held_out(t: Table, variant: dict, bounds=None) -> dict:
    """Each fold decided with the choices made on the other thirteen (see the module
    docstring); `variant`: `weights` ("fit" or fixed (w, b)), `grid` (level weights tried),
    `fit_on` (the kinds fitted and chosen on), `at` (a fixed threshold instead of the rule),
    `stats` (the reference's statistics), `target` (the rule's floor on answered)."""
    def choose(train_folds: list[str]) -> tuple:
        train = np.isin(t.fold, train_folds)
        w, b = fit_weights(t, train, variant["fit_on"]) if variant["weights"] == "fit" else variant["weights"]
        w = np.asarray(w, dtype=float)
        _, point, at, calibrated, _, _ = choose_level(
            t, w, b, train, variant["grid"], variant["fit_on"], variant.get("stats", SHIPPED_STATISTICS),
            variant.get("target", ANSWER_TARGET), bounds, variant.get("at"))
        return w, b, point, at, calibrated

    decided = np.zeros(len(t.kind), bool)
    chosen = []
    for fold, (w, b, point, at, calibrated) in choose_then_hold_out(sorted(set(t.fold)), choose):
        test = t.fold == fold
        decided[test] = (calibrated >= at)[test] | (t.ratio >= 10.0)[test]
        chosen.append({"fold": fold, "weights": [round(float(v), 3) for v in w], "bias": round(float(b), 3),
                       "level": point, "answer_at": round(float(at), 3)})
    return {"figures": figures(t, decided), "folds": chosen,
            "levels chosen": Counter(json.dumps(c["level"]) for c in chosen).most_common()}


def figures(t: Table, decided: np.ndarray) -> dict:
    out = {}
    for k in KINDS:
        m = t.kind == k
        ans, neg, abst = m & t.answerable, m & ~t.answerable & ~t.abstention, m & t.abstention
        got = {"answered": float(decided[m & t.core].mean()), "negatives answered": float(decided[neg].mean()),
               "covered": float(np.where(decided[ans], t.covered[ans], 0.0).mean()),
               "covered never silent": float(np.nanmean(t.covered[ans])),
               "bm25s covered": float(np.nanmean(t.bm25s_covered[ans])),
               "precision": float(np.nanmean(np.where(decided[ans], t.precision[ans], np.nan))),
               "bm25s precision": float(np.nanmean(t.bm25s_precision[ans])),
               "answerable": int(ans.sum()), "negatives": int(neg.sum())}
        if abst.any():
            got["abstentions answered"] = f"{int(decided[abst].sum())} of {int(abst.sum())}"
        out[k] = got
    return out


# --- the shipped cases -----------------------------------------------------------------


def case_rows() -> list[dict]:
    """Each regression query whose verdict hangs on the threshold: its parts, its store's
    reference, whether it must stay silent or needs an item (locomo_gate.case_bounds' rule)."""
    from garden.evaluation.runner import load_cases
    from garden.formats.cases import spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline
    from garden.pipelines.store_reference import build_reference
    from garden.rerank.stages import Settings

    default, refs, out = make_pipeline("default"), {}, []
    for loaded in load_cases([str(PROJECT / "regression")]):
        for q in loaded.queries:
            e = q.expect
            if e.build_error or (q.spec_fields["settings"].standout or 2.0) <= 1.0:
                continue
            silent = e.max_items == 0 or e.unanswerable
            needs = bool(e.lead or e.include or e.sequence or e.before or e.labels)
            if not (silent or needs):
                continue
            story = load_story(q.story_path)
            spec = spec_for(q, story)
            spec.settings = spec.settings.merged(Settings(answer_at=FORCED))
            stages = default.run(spec).stages
            if "decide" not in stages or standout_ratio(stages) >= 10.0:
                continue
            key = str(q.story_path)
            if key not in refs:
                refs[key] = build_reference(default, story)
            out.append({"name": f"{loaded.id}/{q.name or 'main'}", "silent": silent,
                        "x": [float(stages["decide"][p]) for p in PARTS], "known": refs[key].known.tolist(),
                        "foreign": refs[key].foreign.tolist()})
    return out


def case_bounds(cases: list[dict], t: Table):
    """(w, b, a_known, a_foreign) -> (lowest, highest) threshold keeping every case's verdict,
    and the cases that set them; a case's store without a reference takes the global level
    (the development stores' median)."""
    def bounds(w, b, a_known, a_foreign, stats=SHIPPED_STATISTICS, named=False):
        fallback = float(np.median([v for v in (level(k, f, w, b, a_known, a_foreign, stats)
                                                for k, f in zip(t.known, t.foreign)) if not math.isnan(v)]))
        low, high, who = -math.inf, math.inf, ["", ""]
        for c in cases:
            own = level(features(c["known"]), features(c["foreign"]), w, b, a_known, a_foreign, stats)
            value = float(features(c["x"])[0] @ w + b - (fallback if math.isnan(own) else own))
            if c["silent"] and value >= low:
                low, who[0] = value, c["name"]
            elif not c["silent"] and value < high:
                high, who[1] = value, c["name"]
        return (low, high, who) if named else (low, high)
    return bounds


# --- the report ------------------------------------------------------------------------


BOTH = {"weights": "fit", "grid": LEVEL_GRID, "fit_on": KINDS}
VARIANTS = {
    "before: LoCoMo's weights, one threshold": {"weights": (OLD_WEIGHTS, OLD_BIAS), "grid": [(0.0, 0.0)],
                                                 "fit_on": ("locomo",), "at": OLD_ANSWER_AT},
    "one threshold, refitted on the three": {"weights": "fit", "grid": [(0.0, 0.0)], "fit_on": KINDS},
    "level: known items alone": {"weights": "fit", "grid": [(a, 0.0) for a in (0.5, 1.0, 1.5, 2.0)],
                                 "fit_on": KINDS},
    "level: foreign questions alone": {"weights": "fit", "grid": [(0.0, f) for f in (0.5, 1.0, 1.5, 2.0)],
                                       "fit_on": KINDS},
    "level: both, fitted on LoCoMo and LongMemEval only": {**BOTH, "fit_on": ("locomo", "longmemeval")},
    "level: both, the known items' median": {**BOTH, "stats": ("median", "q90")},
    "level: both, the foreign questions' 75th percentile": {**BOTH, "stats": ("mean", "q75")},
    "level: both, answering floor 0.91": {**BOTH, "target": 0.91},
    "level: both, answering floor 0.93": {**BOTH, "target": 0.93},
    "level: both (shipped)": BOTH,
}


def main(argv=None) -> int:
    args = arguments(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]), ("locomo", "longmemeval"), argv,
                     reuse="refit from the rows the last run saved")
    out = Path(args.out)
    saved = out / "store_gate_rows.json"
    if args.reuse:
        data = json.loads(saved.read_text())
    else:
        rows = []
        for kind, (convs, negatives, folds) in stores(args.locomo, args.longmemeval).items():
            rows += collect(kind, convs, negatives, folds)
        data = {"rows": rows, "cases": case_rows()}
        out.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(data))
    t = Table(data["rows"])
    bounds = case_bounds(data["cases"], t)
    report = {"variants": {}}
    for name, variant in VARIANTS.items():
        got = held_out(t, variant, None if variant.get("at") is not None else bounds)
        report["variants"][name] = got
        print(f"\n{name}  (levels chosen: {got['levels chosen']})")
        for kind, f in got["figures"].items():
            print(f"  {kind:<12} answered {f['answered']:.3f}  negatives {f['negatives answered']:.3f}  "
                  f"covered {f['covered']:.3f} (never silent {f['covered never silent']:.3f}, bm25s "
                  f"{f['bm25s covered']:.3f})  precision {f['precision']:.3f} (bm25s {f['bm25s precision']:.3f})"
                  + (f"  abstentions answered {f['abstentions answered']}" if "abstentions answered" in f else ""))
    # the shipped fit: on every fold
    w, b = fit_weights(t, np.ones(len(t.kind), bool), KINDS)
    every = np.ones(len(t.kind), bool)
    _, point, at, _, by_rule, limits = choose_level(t, w, b, every, LEVEL_GRID, KINDS, bounds=bounds)
    levels = t.levels(w, b, *point)
    report["shipped"] = {"weights (ln top, held, known, ln second)": [round(float(v), 3) for v in w],
                         "bias": round(b, 3), "level weights (known, foreign)": point,
                         "answer_at": round(at, 3), "answer_at by the rule": round(by_rule, 3),
                         "case bounds": [round(v, 3) for v in limits],
                         "bounds set by": bounds(w, b, *point, named=True)[2],
                         "global level": round(float(np.median(levels[[len(k) > 0 for k in t.known]])), 3),
                         "reference seconds (median, max)": [
                             round(float(np.median([r["seconds"] for r in t.stores])), 1),
                             round(float(max(r["seconds"] for r in t.stores)), 1)]}
    print(f"\nfit on every fold: {report['shipped']}")
    write_json(out / "store_gate.json", report, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
