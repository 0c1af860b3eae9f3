"""Choose the decide stage's weights and threshold, and the fill stage's share, on both
development benchmarks: LoCoMo's seven conversations and LongMemEval's sample, each with
negatives (questions the store cannot answer).

Every judged question (answerable) and its store's negatives run through `default` once
with the answer forced (`answer_at` far below any support), so each run records the
query's support parts (decide.py: ln top, held, known), the lanes' standout ratios, and,
for each `min_share` of FILL_SHARES, the packet's evidence coverage and precision as it
would be when answered. The negatives: on LoCoMo, foreign negatives (each conversation is
asked the same number of the other conversations' questions, garden/evaluation/negatives.py,
seed 0); on LongMemEval, the abstention questions (`_abs`: nothing in the haystack answers
them) and LONGMEMEVAL_FOREIGN foreign negatives a haystack (another question's question: no
question's evidence session is in another's haystack, checked on the sample). The folds are
the fourteen of experiments/harness/folds.py: LoCoMo's conversations and LongMemEval's
questions dealt into seven groups by type. Holding each fold out in turn:

- the gate: a logistic regression of answerable against negatives on the other thirteen
  (features ln(top), held, known; scikit-learn, L2, C = 1; each benchmark's rows weighed so
  the two benchmarks count the same), its weights the support's; the threshold `answer_at`
  is the lowest support at which every benchmark answers at most NEGATIVE_CAP of its
  negatives, unless a benchmark would then answer fewer than ANSWER_TARGET of its
  answerable questions (LoCoMo's categories 1-4, every LongMemEval type): then the highest
  support that still answers that many on every benchmark. The operating constraint: refuse
  at least 1 - NEGATIVE_CAP of what the store does not hold, and within that answer (and so
  cover) as much of what it holds as the gate allows; never answer less than ANSWER_TARGET
  of it. Both carry a margin of a point over the targets a held-out store is to reach (0.90
  answered, at most 0.25 of negatives). Both margins were chosen on LoCoMo alone, before
  LongMemEval joined, after seeing held-out figures, and docs/packet.md reports the
  neighbouring values;
- the share: the `min_share` with the best mean coverage on the thirteen among those whose
  packet precision beats `bm25s`'s packet precision on the same thirteen.

The shipped cases bound the threshold: every case query that expects an item and that no
decisive lane answers needs its support at or above `answer_at`, and every query that must
stay silent needs it below (`case_bounds`). A fold's threshold is clamped into that range,
and the report gives the figures with and without the clamp: a rule that helped LoCoMo and
broke a shipped case would not be done.

The held-out conversation is decided and packed with the fold's choices; the held-out
figures together are the honest ones. `--fit-on locomo` fits on LoCoMo's folds alone (the
shipped gate: fitted on both, no threshold meets both benchmarks' targets and each joint
fit costs LoCoMo what it gives LongMemEval; docs/longmemeval.md, "The decision on both
benchmarks"), still reporting both; `--rule refuse-first` drops the answering floor.

    .venv/bin/python experiments/locomo_gate.py [--locomo PATH] [--longmemeval FILE] [--out DIR]
        [--rule answer-first|refuse-first] [--fit-on all|locomo|longmemeval] [--reuse]

PATH defaults to ../shared/data/locomo, FILE to ../shared/data/longmemeval/longmemeval_s_dev.json.gz
(`--longmemeval none`: LoCoMo alone, as before). LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0;
LongMemEval: Wu et al., ICLR 2025, MIT.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:  # run as a script: the project's packages by name
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments, longmemeval_conversations  # noqa: E402
from experiments.harness.folds import choose_then_hold_out, folds_of  # noqa: E402
from experiments.harness.gate import (ANSWER_TARGET, LONGMEMEVAL_FOREIGN, NEGATIVE_CAP, FORCED,  # noqa: E402
                                      forced, negatives_in_folds, standout_ratio, threshold_rule)
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.abstention import auroc  # noqa: E402
from garden.evaluation.locomo import load_conversations  # noqa: E402
from garden.evaluation.negatives import foreign_negatives  # noqa: E402
from garden.evaluation.packets import packet_row  # noqa: E402
from garden.rerank.stages import SETTING_DEFAULTS, Settings  # noqa: E402

FILL_SHARES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35)


def _features(stages: dict) -> list[float]:
    d = stages["decide"]
    return [math.log(max(d["top"], 1e-3)), d["held"], d["known"]]


def collect(conversations, negatives, bench: str = "locomo", folds: dict | None = None) -> list[dict]:
    """One row per question: its conversation, benchmark, fold, kind, features and packets
    per share. `folds` maps a qid to its fold (default: its conversation)."""
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec

    default, bm25s = make_pipeline("default"), make_pipeline("bm25s")
    rows = []
    for conv in conversations:
        story = conv.story
        for q in conv.questions + negatives.get(story.story, []):
            row = {"story": story.story, "qid": q.qid, "negative": not q.evidence, "bench": bench,
                   "fold": (folds or {}).get(q.qid, story.story),
                   "core": bool(q.evidence) and not q.category.startswith("5"), "packets": {}}
            for share in FILL_SHARES:
                outcome = default.run(forced(story, q, min_share=share))
                if share == FILL_SHARES[0]:
                    # a query triage asks about or skips never reaches the gate: it is not answered
                    stages = outcome.stages
                    row["x"] = _features(stages) if "decide" in stages else None
                    row["ratio"] = standout_ratio(stages) if "decide" in stages else 0.0
                r = packet_row(q, outcome.packet, story)
                row["packets"][share] = (r.covered, r.precision)
                if row["negative"]:
                    break  # a negative's packet is judged by the decision alone
            if not row["negative"]:
                r = packet_row(q, bm25s.run(QuerySpec(story, q.text, q.as_of)).packet, story)
                row["bm25s"] = r.precision
            rows.append(row)
        if bench == "locomo":
            print(f"{story.story}: {sum(1 for r in rows if r['story'] == story.story)} questions", flush=True)
    return rows


def longmemeval_rows(path: Path) -> list[dict]:
    """The rows of LongMemEval's sample: every question (the abstention ones negatives) and
    LONGMEMEVAL_FOREIGN foreign negatives a haystack, each negative in its store's fold."""
    conversations = longmemeval_conversations(path)
    foreign, folds = negatives_in_folds(conversations, folds_of("longmemeval", conversations),
                                        per_store=LONGMEMEVAL_FOREIGN)
    print(f"LongMemEval: {len(conversations)} haystacks", flush=True)
    return collect(conversations, foreign, "longmemeval", folds)


def fit_gate(rows: list[dict], rule: str = "answer-first") -> tuple[list[float], float, float]:
    """(weights, bias, answer_at) from these rows (see the module docstring); `rule`
    "refuse-first" drops the answering floor: the lowest threshold that answers at most
    NEGATIVE_CAP of every benchmark's negatives, whatever that leaves answered."""
    from sklearn.linear_model import LogisticRegression

    counts = {b: sum(1 for r in rows if r["bench"] == b) for b in {r["bench"] for r in rows}}
    gated = [r for r in rows if r["x"] is not None]
    model = LogisticRegression(C=1.0).fit([r["x"] for r in gated], [not r["negative"] for r in gated],
                                          sample_weight=[len(rows) / (len(counts) * counts[r["bench"]])
                                                         for r in gated])
    weights, bias = [float(w) for w in model.coef_[0]], float(model.intercept_[0])
    by_bench = {}
    for bench in sorted(counts):
        mine = [r for r in rows if r["bench"] == bench]
        by_bench[bench] = ([_support(r, weights, bias) for r in mine if r["core"]],
                           [_support(r, weights, bias) for r in mine if r["negative"]])
    return weights, bias, threshold_rule(by_bench, rule)


def case_bounds(weights, bias, decisive) -> tuple[float, float, list[str]]:
    """(lowest, highest) `answer_at` that keeps the shipped cases' verdicts, and the queries
    that set each bound (see the module docstring)."""
    from garden.evaluation.runner import load_cases
    from garden.formats.cases import spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    default = make_pipeline("default")
    low, high, why = -math.inf, math.inf, ["", ""]
    for loaded in load_cases(["regression", "challenge"]):
        if loaded.suite != "regression":
            continue
        for q in loaded.queries:
            e = q.expect
            if (q.spec_fields["settings"].standout or 2.0) <= 1.0:
                continue  # the cutoff off: the verdict does not depend on the threshold
            silent = e.max_items == 0 or e.unanswerable
            needs_item = bool(e.lead or e.include or e.sequence or e.before or e.labels)
            if not (silent or needs_item):
                continue
            spec = spec_for(q, load_story(q.story_path))
            spec.settings = spec.settings.merged(Settings(answer_at=FORCED))
            stages = default.run(spec).stages
            if "decide" not in stages or standout_ratio(stages) >= decisive:
                continue
            support = float(np.dot(weights, _features(stages)) + bias)
            name = f"{loaded.id}/{q.name or 'main'}"
            if silent and support >= low:
                low, why[0] = support, name
            elif needs_item and support < high:
                high, why[1] = support, name
    return low, high, why


@contextmanager
def gate_weights(weights, bias):
    """The decide stage's support with a fold's weights, for checking the shipped cases at
    that fold's threshold (the stage reads the weights of the support's module,
    garden/rerank/support.py, when it scores)."""
    import garden.rerank.support as formula

    shipped = formula.W_TOP, formula.W_HELD, formula.W_KNOWN, formula.W_BIAS
    formula.W_TOP, formula.W_HELD, formula.W_KNOWN, formula.W_BIAS = (*weights, bias)
    try:
        yield
    finally:
        formula.W_TOP, formula.W_HELD, formula.W_KNOWN, formula.W_BIAS = shipped


def case_failures(answer_at: float, share: float, weights, bias) -> list[str]:
    """The shipped regression queries whose verdict fails under `default` with this
    threshold, share and support weights (a case's own settings win)."""
    with gate_weights(weights, bias):
        return _case_failures(answer_at, share)


def _case_failures(answer_at: float, share: float) -> list[str]:
    from garden.evaluation.runner import load_cases
    from garden.formats.cases import check, spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    default, failed = make_pipeline("default"), []
    for loaded in load_cases(["regression"]):
        for q in loaded.queries:
            if q.expect.build_error:
                continue
            story = load_story(q.story_path)
            spec = spec_for(q, story)
            spec.settings = Settings(answer_at=answer_at, min_share=share).merged(spec.settings)
            if check(q.expect, default.run(spec).packet, story, spec.include_private):
                failed.append(f"{loaded.id}/{q.name or 'main'}")
    return failed


def _support(row: dict, weights, bias) -> float:
    """The row's support under these weights; -inf for a query that never reached the gate."""
    return -math.inf if row["x"] is None else float(np.dot(weights, row["x"]) + bias)


def answers(row: dict, weights, bias, answer_at, decisive) -> bool:
    return row["x"] is not None and (_support(row, weights, bias) >= answer_at or row["ratio"] >= decisive)


def fit_share(rows: list[dict], decided: list[bool], allowed=FILL_SHARES) -> float:
    """The share with the best coverage whose precision beats bm25s's on these rows, of
    those `allowed` (the shares that keep every shipped case's verdict)."""
    answerable = [(r, a) for r, a in zip(rows, decided) if not r["negative"]]
    bm25s = float(np.mean([r["bm25s"] for r, _ in answerable if r["bm25s"] is not None]))
    best = None
    for share in allowed:
        coverage = float(np.mean([r["packets"][share][0] if a else 0.0 for r, a in answerable]))
        precision = [r["packets"][share][1] for r, a in answerable if a and r["packets"][share][1] is not None]
        if precision and float(np.mean(precision)) > bm25s and (best is None or coverage > best[0]):
            best = (coverage, share)
    return best[1] if best else SETTING_DEFAULTS["min_share"]


def figures(rows: list[dict], decided: list[bool], shares: list[float]) -> dict:
    core = [a for r, a in zip(rows, decided) if r["core"]]
    neg = [a for r, a in zip(rows, decided) if r["negative"]]
    answerable = [(r, a, s) for r, a, s in zip(rows, decided, shares) if not r["negative"]]
    precision = [r["packets"][s][1] for r, a, s in answerable if a and r["packets"][s][1] is not None]
    return {"answered (core)": float(np.mean(core)), "answered (negatives)": float(np.mean(neg)),
            "evidence covered": float(np.mean([r["packets"][s][0] if a else 0.0 for r, a, s in answerable])),
            "covered when answered": float(np.mean([r["packets"][s][0] for r, a, s in answerable if a])),
            "precision": float(np.mean(precision)) if precision else None,
            "bm25s precision": float(np.mean([r["bm25s"] for r, _, _ in answerable if r["bm25s"] is not None]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rule", choices=("answer-first", "refuse-first"), default="answer-first",
                    help="the threshold rule (fit_gate)")
    ap.add_argument("--fit-on", default="all", help="the benchmarks the gate is fitted on (comma-separated, "
                    "or all); every benchmark's held-out figures are reported either way")
    args = arguments(ap, ("locomo", "longmemeval"), argv, optional=("longmemeval",),
                     reuse="fit again from the rows the last run collected (OUT/locomo_gate_rows_*.json)")
    with_lme = args.longmemeval.lower() != "none"
    parts = [("locomo", lambda: collect(*(lambda c: (c, foreign_negatives(c)))(load_conversations(args.locomo))))]
    if with_lme:
        parts.append(("longmemeval", lambda: longmemeval_rows(Path(args.longmemeval))))
    rows = []
    for name, make in parts:   # each benchmark's rows saved as soon as they are collected
        cache = Path(args.out) / f"locomo_gate_rows_{name}.json"
        if args.reuse and cache.is_file():
            part = json.loads(cache.read_text())
            for r in part:
                r["packets"] = {float(k): v for k, v in r["packets"].items()}
        else:
            part = make()
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(part))
        rows += part
    decisive = SETTING_DEFAULTS["decisive"]
    names = sorted({r["fold"] for r in rows})
    benches = sorted({r["bench"] for r in rows})
    folds, decided, shares, scores = [], [None] * len(rows), [None] * len(rows), [None] * len(rows)
    unclamped = [None] * len(rows)
    fitted = benches if args.fit_on == "all" else args.fit_on.split(",")

    def choose(train_folds: list[str]) -> tuple:
        """The fold's choices, made on the training folds' rows of the benchmarks fitted."""
        train = [r for r in rows if r["fold"] in train_folds and r["bench"] in fitted]
        weights, bias, rule = fit_gate(train, args.rule)
        low, high, _ = case_bounds(weights, bias, decisive)
        answer_at = min(max(rule, math.nextafter(low, math.inf)), high)
        allowed = [x for x in FILL_SHARES if not case_failures(answer_at, x, weights, bias)]
        share = fit_share(train, [answers(r, weights, bias, answer_at, decisive) for r in train], allowed)
        return weights, bias, rule, low, high, answer_at, allowed, share

    for held, (weights, bias, rule, low, high, answer_at, allowed, share) in choose_then_hold_out(names, choose):
        for i, r in enumerate(rows):
            if r["fold"] == held:
                unclamped[i] = answers(r, weights, bias, rule, decisive)
                decided[i] = answers(r, weights, bias, answer_at, decisive)
                shares[i] = share
                scores[i] = _support(r, weights, bias)
        test = [i for i, r in enumerate(rows) if r["fold"] == held]
        folds.append({"held_out": held, "weights": [round(w, 3) for w in weights], "bias": round(bias, 3),
                      "answer_at by the rule": round(rule, 3), "case bounds": [round(low, 3), round(high, 3)],
                      "answer_at": round(answer_at, 3), "shares the cases allow": allowed, "min_share": share,
                      **figures([rows[i] for i in test], [decided[i] for i in test], [shares[i] for i in test])})
    held_out = {}
    for bench in benches:
        mine = [i for i, r in enumerate(rows) if r["bench"] == bench]
        row = figures([rows[i] for i in mine], [decided[i] for i in mine], [shares[i] for i in mine])
        row["gate AUROC"] = auroc([scores[i] for i in mine if not rows[i]["negative"]],
                                  [scores[i] for i in mine if rows[i]["negative"]])
        row["answered without the case bounds (core)"] = float(np.mean([unclamped[i] for i in mine
                                                                          if rows[i]["core"]]))
        row["answered without the case bounds (negatives)"] = float(np.mean([unclamped[i] for i in mine
                                                                              if rows[i]["negative"]]))
        held_out[bench] = row
    weights, bias, rule = fit_gate([r for r in rows if r["bench"] in fitted], args.rule)
    low, high, why = case_bounds(weights, bias, decisive)
    answer_at = math.floor(min(max(rule, math.nextafter(low, math.inf)), high) * 100) / 100
    allowed = [x for x in FILL_SHARES if not case_failures(answer_at, x, weights, bias)]
    trained = [r for r in rows if r["bench"] in fitted]
    share = fit_share(trained, [answers(r, weights, bias, answer_at, decisive) for r in trained], allowed)
    shipped = {"weights (ln top, held, known)": [round(w, 2) for w in weights], "bias": round(bias, 2),
               "answer_at by the rule": round(rule, 3), "case bounds": [round(low, 3), round(high, 3)],
               "bounds set by": why, "answer_at": answer_at, "shares the cases allow": allowed, "min_share": share,
               "decisive": decisive}
    print("\nleave-one-fold-out (each fold decided and packed with the choices of the others):")
    for f in folds:
        print(f"  {f['held_out']}: weights {f['weights']} bias {f['bias']} answer_at {f['answer_at']} "
              f"(rule {f['answer_at by the rule']}, cases allow {f['case bounds']}) "
              f"min_share {f['min_share']} (cases allow {f['shares the cases allow']})  "
              f"answered {f['answered (core)']:.3f} / "
              f"negatives {f['answered (negatives)']:.3f}  covered {f['evidence covered']:.3f}  "
              f"precision {f['precision']:.3f} (bm25s {f['bm25s precision']:.3f})")
    for bench, row in held_out.items():
        print(f"  held-out, {bench}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if v is not None))
    print(f"  fit on every fold (shipped): {shipped}")
    ratios = [r["ratio"] for r in rows]
    print(f"  largest standout ratio of any question: {max(ratios):.2f} (decisive is {decisive:g})")
    out = Path(args.out)
    variant = "" if (args.rule, args.fit_on) == ("answer-first", "all") else f"_{args.rule}_{'+'.join(fitted)}"
    report = {"rule": args.rule, "fit_on": fitted, "folds": folds, "held_out": held_out, "shipped": shipped,
              "fill_shares": FILL_SHARES, "answer_target": ANSWER_TARGET, "negative_cap": NEGATIVE_CAP}
    write_json(out / f"locomo_gate{variant}.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
