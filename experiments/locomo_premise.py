"""Choose `premise_ratio` by leave-one-conversation-out on LoCoMo, and report its rates.

The premise stage warns when the best evidence for a question is about another person
than the one it names (garden/rerank/premise.py). Each judged question of the seven
conversations is run once under `default`; the stage's trace holds the ratio it tested.
For each conversation in turn, the threshold is chosen on the other six: the one that
flags the most adversarial (category 5) questions while flagging at most 5% of the others
(categories 1-4), else the one with the fewest false alarms. The held-out rates, pooled,
are the honest figures. Judgments: LoCoMo's categories (Maharana et al., ACL 2024; CC BY-NC
4.0), never the pipeline's own output.

    .venv/bin/python experiments/locomo_premise.py [--locomo PATH] [--out DIR]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))

from experiments.harness.benchmarks import arguments  # noqa: E402
from experiments.harness.folds import choose_then_hold_out  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402
from garden.evaluation.locomo import load_conversations  # noqa: E402
from garden.pipelines import make_pipeline  # noqa: E402
from garden.rerank.query import QuerySpec  # noqa: E402
from garden.rerank.stages import SETTING_DEFAULTS, Settings  # noqa: E402

THRESHOLDS = (1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0)
MAX_FALSE_ALARMS = 0.05
ADVERSARIAL = "5"


def rates(rows: list[tuple[str, str, float | None]], threshold: float) -> tuple[float, float]:
    """(share of category 5 flagged, share of categories 1-4 flagged)."""
    def share(selected):
        return sum(1 for r in selected if r[2] is not None and r[2] >= threshold) / max(1, len(selected))

    adversarial = [r for r in rows if r[1].startswith(ADVERSARIAL)]
    others = [r for r in rows if not r[1].startswith(ADVERSARIAL)]
    return share(adversarial), share(others)


def choose(rows) -> float:
    allowed = [t for t in THRESHOLDS if rates(rows, t)[1] <= MAX_FALSE_ALARMS]
    if allowed:
        return max(allowed, key=lambda t: (rates(rows, t)[0], -t))
    return min(THRESHOLDS, key=lambda t: (rates(rows, t)[1], t))


def main(argv: list[str] | None = None) -> int:
    args = arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), ("locomo",), argv)
    pipeline = make_pipeline("default")
    rows: list[tuple[str, str, float | None]] = []  # (conversation, category, ratio tested)
    never = Settings(premise_ratio=1e12)  # measure the ratio, flag nothing
    for conv in load_conversations(args.locomo):
        for q in conv.questions:
            trace = pipeline.run(QuerySpec(conv.story, q.text, q.as_of, settings=never)).stages.get("premise")
            ratio = None if trace is None else (trace["ratio"] if trace["ratio"] is not None else float("inf"))
            rows.append((conv.story.story, q.category, ratio))
    names = sorted({r[0] for r in rows})
    folds, held = [], []
    for name, t in choose_then_hold_out(names, lambda train: choose([r for r in rows if r[0] in train])):
        test = [r for r in rows if r[0] == name]
        folds.append({"held_out": name, "chosen": t, "adversarial_flagged": rates(test, t)[0],
                      "false_alarms": rates(test, t)[1]})
        held += [(r[0], r[1], r[2], t) for r in test]
    adversarial = [r for r in held if r[1].startswith(ADVERSARIAL)]
    others = [r for r in held if not r[1].startswith(ADVERSARIAL)]
    flagged = sum(1 for r in adversarial if r[2] is not None and r[2] >= r[3]) / len(adversarial)
    alarms = sum(1 for r in others if r[2] is not None and r[2] >= r[3]) / len(others)
    print("threshold on all seven: " + "; ".join(
        f"{t}: category 5 {rates(rows, t)[0]:.3f}, categories 1-4 {rates(rows, t)[1]:.3f}" for t in THRESHOLDS))
    for f in folds:
        print(f"  {f['held_out']}: chosen {f['chosen']}, category 5 flagged {f['adversarial_flagged']:.3f}, "
              f"false alarms {f['false_alarms']:.3f}")
    print(f"held out, pooled: category 5 flagged {flagged:.3f} ({len(adversarial)} questions), "
          f"false alarms on 1-4 {alarms:.3f} ({len(others)} questions)")
    chosen = Counter(f["chosen"] for f in folds).most_common()
    print(f"thresholds chosen: {chosen}; shipped premise_ratio {SETTING_DEFAULTS['premise_ratio']}")
    write_json(Path(args.out) / "locomo_premise.json", {
        "folds": folds, "held_out": {"adversarial_flagged": flagged, "false_alarms": alarms},
        "all": {str(t): dict(zip(("adversarial_flagged", "false_alarms"), rates(rows, t))) for t in THRESHOLDS},
        "shipped": SETTING_DEFAULTS["premise_ratio"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
