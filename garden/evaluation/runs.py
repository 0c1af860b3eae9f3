"""Producing runs: each query of a test collection ranked under each pipeline, timed, and
written as TREC run files. What the runs are worth is measured in measures.py."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

from garden._terminal import Progress
from garden.errors import GardenError
from garden.evaluation.measures import WARM_UP, Ranking, Run, natural_key
from garden.formats.corpora import Collection
from garden.retrievers import Retriever, check_finite, load_models, make_retriever, rank


def write_trec_run(path: str | Path, run: Run, tag: str) -> Path:
    """`qid Q0 docno rank score tag` lines; each ranking re-sorted by score, ties by docno,
    so the file is the same whatever order the run came in."""
    if not tag or any(c.isspace() for c in tag):
        raise GardenError(f"a run tag must be one word, got {tag!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for qid in sorted(run, key=natural_key):
        for position, (doc, score) in enumerate(sorted(run[qid], key=lambda ds: (-ds[1], ds[0])), 1):
            if not doc or any(c.isspace() for c in doc + qid):
                raise GardenError(f"{path}: query {qid!r}, document {doc!r}: a run file cannot hold an empty id "
                                  "or one with spaces")
            lines.append(f"{qid} Q0 {doc} {position} {float(score)!r} {tag}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def write_trec_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """`qid 0 docno grade` lines, the judgments a run file is scored against (trec_eval,
    ranx, ir-measures read them), in the runs' order: queries naturally, documents by id."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{qid} 0 {doc} {grade}\n" for qid in sorted(qrels, key=natural_key)
                            for doc, grade in sorted(qrels[qid].items())), encoding="utf-8")
    return path


def write_trec_files(folder: str | Path, runs: Mapping[str, Run], qrels: Mapping[str, Mapping[str, int]],
                     level: str = "") -> list[Path]:
    """Every pipeline's run as `<folder>/<pipeline>[.<level>].run` and the judgments beside
    them as `<folder>/[<level>.]qrels`: what `trec_eval qrels run` or ranx scores."""
    suffix, prefix = (f".{level}", f"{level}.") if level else ("", "")
    written = [write_trec_run(Path(folder) / f"{name}{suffix}.run", {q: v for q, v in run.items() if v}, name)
               for name, run in runs.items()]
    return [*written, write_trec_qrels(Path(folder) / f"{prefix}qrels", qrels)]


def rankings(retriever: Retriever, queries: Sequence[str], depth: int) -> list[Ranking]:
    """Each query's top `depth`, ties by id, through the fastest method the retriever has:
    a ranked batch (`top_many`), a scored batch (`score_many`) or one query at a time."""
    top_many = getattr(retriever, "top_many", None)
    if callable(top_many):
        return top_many(list(queries), depth)
    score_many = getattr(retriever, "score_many", None)
    scored = score_many(list(queries)) if callable(score_many) else [retriever.score(q) for q in queries]
    return [rank(scores, depth) for scores in scored]


class Runs(NamedTuple):
    rankings: dict[str, Run]  # pipeline -> qid -> ranking
    queries_per_s: dict[str, float]  # pipeline -> queries scored and ranked per second
    index_s: dict[str, float]  # pipeline -> seconds to index the collection


def run_collection(collection: Collection, pipelines: Sequence[str], depth: int = 1000) -> Runs:
    """Rank every query of `collection` to `depth` under each named pipeline: a bare
    retriever indexes the documents and ranks them; a structured pipeline (`default`,
    `default-phrase`, ...) ranks the collection as a story of source records (see
    garden/pipelines/ranking.py), every structured pipeline of one call sharing the story
    and its indexes. Structured names are checked before anything is indexed. Timings are
    wall-clock figures for a report, never inputs to a result."""
    from garden.pipelines import check_pipeline, split_structured

    if depth < 1:
        raise GardenError(f"depth must be at least 1, got {depth}")
    if len(set(pipelines)) != len(pipelines):
        raise GardenError(f"a pipeline is named twice in {', '.join(pipelines)}")
    for name in pipelines:
        if split_structured(name) is not None:
            check_pipeline(name)
    qids = list(collection.queries)
    texts = [collection.queries[q] for q in qids]
    runs: dict[str, Run] = {}
    speed: dict[str, float] = {}
    index_s: dict[str, float] = {}
    structured = _StructuredRuns(collection)
    with Progress("compare", total=len(pipelines), unit="pipelines done") as bar:
        for name in pipelines:
            bar.now(f"{name}: indexing {len(collection.docs):,} documents and ranking {len(qids):,} queries")
            ranked, index_s[name], elapsed = _run_one(structured, collection, name, texts, depth)
            bar.advance()
            for qid, ranking in zip(qids, ranked):  # the same refusal every pipeline's scores meet
                check_finite(f"{name} (query {qid})", dict(ranking))
            runs[name] = dict(zip(qids, ranked))
            speed[name] = len(qids) / elapsed if elapsed > 0 else None  # too fast to time: no figure
    return Runs(runs, speed, index_s)


def _run_one(structured: "_StructuredRuns", collection: Collection, name: str, texts: Sequence[str],
             depth: int) -> tuple[list[Ranking], float, float]:
    """(each query's ranking, seconds to index, seconds to rank) of one pipeline."""
    from garden.pipelines import split_structured

    if split_structured(name) is not None:
        return structured.run(name, texts, depth)
    retriever = make_retriever(name)
    start = time.perf_counter()
    retriever.index(collection.docs)
    load_models(retriever)
    index_s = time.perf_counter() - start
    # An untimed warm-up batch: first-call costs (a model's first forward passes at a
    # full batch shape, cold caches) are paid once per process, not per query.
    rankings(retriever, texts[:WARM_UP], depth)
    start = time.perf_counter()
    ranked = rankings(retriever, texts, depth)
    return ranked, index_s, time.perf_counter() - start


STRUCTURED_WARM_UP = 2  # structured queries run one at a time: a couple pay the first-call costs


class _StructuredRuns:
    """The structured pipelines of one `run_collection` call: the collection's story is
    built once, and its indexes live in a cache of their own, shared by these pipelines
    (`default` and `default-phrase` index once) and dropped with the run rather than kept
    for the process."""

    def __init__(self, collection: Collection):
        from garden.pipelines.indexes import IndexCache

        self.collection = collection
        self.indexes = IndexCache(bound=8)
        self.story = None

    def run(self, name: str, texts: Sequence[str], depth: int) -> tuple[list[Ranking], float, float]:
        """(each query's ranking, seconds to build the story and indexes, seconds to rank)."""
        from garden.pipelines import structured_pipeline
        from garden.pipelines.ranking import collection_story, prepare, rank_texts

        pipeline = structured_pipeline(name, self.indexes)
        start = time.perf_counter()
        if self.story is None:
            self.story = collection_story(self.collection.name, self.collection.docs)
        prepare(pipeline, self.story.story)
        index_s = time.perf_counter() - start
        rank_texts(pipeline, self.story, texts[:STRUCTURED_WARM_UP], depth)
        start = time.perf_counter()
        ranked = rank_texts(pipeline, self.story, texts, depth)
        return ranked, index_s, time.perf_counter() - start
