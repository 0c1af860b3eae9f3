"""LoCoMo (a file, a folder of them, or `garden import locomo` output): each conversation
a store, judged by its evidence turns at turn and session level, with the packet; its
negatives built from the stores; its chats read as released, raw or as messages
(garden/evaluation/locomo.py, garden/formats/chats.py)."""
from __future__ import annotations

from garden.evaluation.kinds.kind import Kind, Options
from garden.evaluation.locomo import FUSION_NAME, compare_locomo, load_conversations
from garden.evaluation.negatives import SEED


def compare(path, pipelines, baseline, plot=None, metrics=None, trec_dir=None, negatives=None,
            negatives_per_store=None, negatives_seed=None, form=None):
    return compare_locomo(path, pipelines, baseline, negatives=negatives, negatives_per_store=negatives_per_store,
                          negatives_seed=SEED if negatives_seed is None else negatives_seed, plot=plot,
                          metrics=metrics, trec_dir=trec_dir, form=form)


KIND = Kind("locomo", "LoCoMo", compare, references=(FUSION_NAME,), stores=load_conversations, options=(
    Options(("negatives",), "builds unanswerable questions from a set of conversational stores (LoCoMo, or "
            "`garden import locomo` output)"),
    Options(("negatives_per_store", "negatives_seed"), "size and seed the negatives LoCoMo builds"),
    Options(("form",), "reads LoCoMo's chats raw or as messages (garden/formats/chats.py)"),
))
