"""`garden compare` on LoCoMo: every pipeline ranks each question's conversation, judged by
its evidence turns, at turn and at session level, by category, with the packet it serves.

The conversations are read from a LoCoMo file or folder (either layout; see
garden/formats/locomo.py, and cite LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0) or from
the output of `garden import locomo` (its `fixtures/locomo-*.yaml` and `cases/`). A
question is judged when it has at least one evidence turn; its relevant documents are its
evidence turns (ABOUT.md of the data: 1,425 such questions in the seven conversations).

One rule turns every pipeline's ranking into a ranking of turns (`turn_ranking`): a turn
stands for itself; a record citing turns (an observation, a session summary) stands, at
its own position, for the turns it cites that are not ranked yet, in the order of the
pipeline's own scores for them (a turn it did not score counts 0), ties in story order;
anything else is left out. Session level: each pipeline's own ranking of sittings, as
stores.py reads it (the sittings stage's, or the bare rule's: a sitting ranked by the best
score of a record standing in it).

Bare retrievers rank the whole story (turns, observations, summaries) as one batch; a
structured pipeline runs its stages per question with `candidates` raised to the depth and
ranks by the reranker's score (`Ranked.by_relevance`). The packet a user would get is the
pipeline's own run at the default budget (garden/evaluation/packets.py). Negatives, built
from the stores (`--negatives foreign`, garden/evaluation/negatives.py) or declared by an
imported case (`unanswerable: true`), are asked like any question and judged only by what
the user gets: no ranking measure is defined for a question that nothing answers.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from garden.formats.chats import FORMS, write_form
from garden.formats.layout import CASES_FOLDER, STORY_FOLDER
from garden.errors import GardenError
from garden.derived.home import derived_folder
from garden.evaluation.compare import ALPHA, PERMUTATIONS
from garden.evaluation.negatives import FOREIGN_HOW, NEGATIVE_KINDS, SEED as NEGATIVES_SEED, foreign_negatives
from garden.evaluation.packets import plot_decisions
from garden.evaluation.stores import (ALL_AT, DEPTH, TURN_KIND, TURN_MEASURES, Conversation, Question, Reference,
                                      StoresReport, iter_imported, judge_runs, questions_of,
                                      run_stores, store_measures, stores_report, turn_ranking, write_store_runs)
from garden.models import DEFAULT_BUDGET, Story

__all__ = ["ALL_AT", "DEPTH", "TURN_MEASURES", "Conversation", "Question", "turn_ranking", "compare_locomo",
           "is_locomo", "load_conversations", "five_list_fusion", "FUSION_NAME"]

CATEGORY = re.compile(r"category (\d+) \(([^)]*)\)")
FUSION_NAME = "locomo-fusion"  # the five-list reference fusion (five_list_fusion, below)
FUSION_K = 60
JUDGMENTS = ("LoCoMo evidence turns (Maharana et al., ACL 2024; CC BY-NC 4.0): a question's "
             "relevant documents are its evidence turns; derived records stand for the turns they cite")


def category_of(text: str | None) -> str:
    """A LoCoMo case's category ("5 adversarial") from its `about`, else "uncategorized"."""
    m = CATEGORY.search(text or "")
    return f"{m.group(1)} {m.group(2)}" if m else "uncategorized"


def is_locomo(path: Path) -> bool:
    """A LoCoMo file, a folder of them, or the output of `garden import locomo`, by the
    markers garden/formats/sources.py reads. Whether the JSON is really LoCoMo is the
    reader's to say, with a located line."""
    from garden.formats.sources import markers

    return "locomo" in markers(path)


def load_conversations(path: str | Path, form: str | None = None) -> list[Conversation]:
    """The conversations and judged questions under `path` (see the module docstring), in
    `form` (garden/formats/chats.py: released, raw or messages; released by default)."""
    path = Path(path)
    imported = path.is_dir() and (path / STORY_FOLDER).is_dir() and (path / CASES_FOLDER).is_dir()
    if form not in (None, FORMS[0]):
        if imported:
            raise GardenError(f"{path}: `form` {form} is built from LoCoMo's JSON files; an import's stories "
                              "are already built")
        import tempfile

        with tempfile.TemporaryDirectory(prefix="garden-chats-") as scratch:
            # every conversation is read whole before the scratch copy goes
            try:
                return _load_files(write_form(path, Path(scratch), form), path.name)
            except GardenError as exc:  # named by the files the user gave, not the scratch copy
                where = str(path if path.is_dir() else path.parent)
                raise GardenError([m.replace(scratch, where) for m in exc.messages], exc.status) from None
    if imported:
        return _load_imported(path)
    return _load_files(path, path.name)


def _load_files(path: Path, shown: str) -> list[Conversation]:
    from garden.formats.locomo import build, read_conversations

    from garden._terminal import Progress, counted

    out = []
    for conv in counted(read_conversations(path), Progress(f"reading {shown}", unit="conversations")):
        imported = build(conv)
        story = Story.model_validate(imported.story)
        out.append(Conversation(story, questions_of(story, list(imported.cases.values()), category_of)))
    return out


def _load_imported(root: Path) -> list[Conversation]:
    from garden._terminal import Progress, counted

    out = list(counted(iter_imported(root, "locomo-*.yaml", category_of),
                       Progress(f"reading {root.name}", unit="conversations")))
    if not out:
        raise GardenError(f"{root}: no fixtures/locomo-*.yaml to compare on")
    return out


def compare_locomo(path: str | Path, pipelines: Sequence[str], baseline: str | None = None,
                   depth: int = DEPTH, budget: int = DEFAULT_BUDGET, packets: bool = True,
                   permutations: int = PERMUTATIONS, alpha: float = ALPHA, negatives: str | None = None,
                   negatives_per_store: int | None = None, negatives_seed: int = NEGATIVES_SEED,
                   plot: str | Path | None = None, metrics: Sequence[str] | None = None,
                   trec_dir: str | Path | None = None, form: str | None = None) -> StoresReport:
    """Everything `garden compare` does on LoCoMo short of printing. `negatives` adds
    unanswerable questions built from the stores themselves (see negatives.py); a case that
    declares itself unanswerable is one already. Negatives are judged by their decision and
    packet only: no ranking measure is defined for a question nothing answers. `metrics`
    adds measures to the fixed ones, `trec_dir` receives the runs and qrels of both levels,
    `form` reads the chats raw or as messages (garden/formats/chats.py)."""
    baseline = check_comparison(pipelines, baseline)
    measures = store_measures(metrics)
    if negatives is not None and negatives not in NEGATIVE_KINDS:
        raise GardenError(f"negatives {negatives!r}: choose one of {', '.join(NEGATIVE_KINDS)}")
    if negatives is None and negatives_per_store is not None:
        raise GardenError("a count of negatives per store needs a kind of negatives to build (foreign)")
    conversations = load_conversations(path, form)
    added = foreign_negatives(conversations, negatives_per_store, negatives_seed) if negatives else {}
    if not any(q.evidence for c in conversations for q in c.questions):
        raise GardenError(f"{path}: no question names an evidence turn: nothing to judge")
    runs = run_stores(((c, c.questions + added.get(c.story.name, [])) for c in conversations),
                      made_pipelines(pipelines), depth, budget, packets)
    name = str(path) if form in (None, FORMS[0]) else f"{path} ({form})"
    judged = judge_runs(runs, baseline, name, permutations, alpha, measures)
    if trec_dir is not None:
        write_store_runs(runs, trec_dir)
    report = stores_report(runs, judged, name, baseline, JUDGMENTS,
                           negatives=_negatives_note(runs.asked, negatives, negatives_per_store, negatives_seed))
    if report.packets is not None and report.negatives is not None:
        report.plot = plot_decisions(report.packets, plot or derived_folder("reports") / "locomo-risk-coverage.png",
                                     f"{Path(name).name}: answer or stay silent "
                                     f"({report.negatives['negatives']} negatives)")
    return report


def check_comparison(pipelines: Sequence[str], baseline: str | None) -> str:
    """The baseline (the first pipeline when none is named), once every name is checked."""
    from garden.pipelines import check_pipeline

    if not pipelines:
        raise GardenError("no pipeline to compare")
    for p in pipelines:
        if p != FUSION_NAME:
            check_pipeline(p)
    baseline = baseline or pipelines[0]
    if baseline not in pipelines:
        raise GardenError(f"baseline {baseline!r} is not among the pipelines: {', '.join(pipelines)}")
    return baseline


def made_pipelines(pipelines: Sequence[str]) -> dict[str, object]:
    """Name -> the pipeline (or LoCoMo's reference fusion) that runs it."""
    from garden.pipelines import make_pipeline

    return {name: FUSION if name == FUSION_NAME else make_pipeline(name) for name in pipelines}


def _negatives_note(asked: dict[str, list[Question]], kind: str | None, per_store: int | None,
                    seed: int) -> dict | None:
    """How the comparison's negatives were built, for the report; None when it has none."""
    found = [q for qs in asked.values() for q in qs if not q.evidence]
    if not found:
        return None
    counts = {story: sum(1 for q in qs if not q.evidence) for story, qs in asked.items()}
    how = []
    if kind == "foreign":
        how.append(f"foreign: {FOREIGN_HOW} (seed {seed}, {per_store or 'as many as the smallest store asks'} "
                   f"per store)")
    if any(q.negative == "declared" for q in found):
        how.append("declared: cases that say `unanswerable: true`")
    return {"kind": " and ".join(sorted({q.negative for q in found})), "negatives": len(found),
            "per_store": counts, "how": "; ".join(how),
            "judgments": "nothing in this store answers it: no relevant record"}


# --- the reference fusion ABOUT.md reports -----------------------------------------------



def _expanded(story: Story, ranking: Sequence[tuple[str, float]]) -> list[str]:
    """A ranking of turns from a ranking of observations: each hit stands for its turns."""
    out: list[str] = []
    seen: set[str] = set()   # a whole ranking expands to every turn: a list's `in` was quadratic
    by_id = story.by_id
    for rid, _ in ranking:
        for tid in by_id[rid].sources if rid in by_id else ():
            if tid not in seen and tid in by_id and by_id[tid].kind == TURN_KIND:
                seen.add(tid)
                out.append(tid)
    return out


def five_list_fusion(conv: Conversation, depth: int = DEPTH,
                     questions: Sequence[Question] | None = None) -> list[list[tuple[str, float]]]:
    """The plain reciprocal-rank fusion (k = 60) of five lists that the data's ABOUT.md
    reports as its strongest reference (Success@1 0.429, Success@5 0.661, nDCG@10 0.552):
    bm25s over the turns, over the observations (each hit standing for the turns it cites),
    and over each turn with the turn before it in its session prepended; MiniLM over the
    turns and over the observations (as the story holds them, with their session stamp),
    these two at weight 0.5. No structure: a reference for
    `default` to beat, so that fusion alone is not mistaken for structure (Cormack, Clarke &
    Buettcher 2009, "Reciprocal rank fusion outperforms Condorcet and individual rank
    learning methods")."""
    from garden.retrievers import Doc, make_retriever
    from garden.retrievers.hybrid import rrf

    story = conv.story
    turns = [r for r in story.records if r.kind == TURN_KIND]
    notes = [r for r in story.records if r.kind == "note" and r.sources]
    session_of = conv.sessions()
    with_previous = [Doc(t.id, f"{p.text} {t.text}" if p is not None and session_of[p.id] == session_of[t.id]
                         else t.text) for p, t in zip([None, *turns[:-1]], turns)]
    corpora = {
        "bm25s turns": ("bm25s", [Doc(t.id, t.text) for t in turns], 1.0, False),
        "bm25s observations": ("bm25s", [Doc(n.id, n.text) for n in notes], 1.0, True),
        "bm25s turn with previous": ("bm25s", with_previous, 1.0, False),
        # MiniLM reads the records as the garden indexes them (with their titles), so their
        # embeddings are the ones every pipeline has cached: one encoding, not two
        "dense turns": ("dense", [Doc(t.id, t.searchable) for t in turns], 0.5, False),
        "dense observations": ("dense", [Doc(n.id, n.searchable) for n in notes], 0.5, True),
    }
    texts = [q.text for q in (conv.questions if questions is None else questions)]
    lists: list[list[list[tuple[str, float]]]] = [[] for _ in texts]  # per question, each corpus's ranking
    for name, docs, _, expand in corpora.values():
        retriever = make_retriever(name)
        retriever.index(docs)
        for i, ranking in enumerate(retriever.top_many(texts, None)):
            lists[i].append([(rid, 0.0) for rid in _expanded(story, ranking)] if expand else ranking)
    weights = [weight for _, _, weight, _ in corpora.values()]
    fused = [rrf(ranked, FUSION_K, weights) for ranked in lists]  # the fusion hybrid uses, weighted
    order = {t.id: n for n, t in enumerate(turns)}
    return [sorted(f.items(), key=lambda kv: (-kv[1], order[kv[0]]))[:depth] for f in fused]


FUSION = Reference(FUSION_NAME, five_list_fusion)
