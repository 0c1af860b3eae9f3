"""A test collection folder (TREC or BEIR layout), judged by its qrels."""
from __future__ import annotations

from pathlib import Path

from garden.evaluation.compare import compare_collection, compare_loaded
from garden.evaluation.kinds.kind import Kind
from garden.evaluation.replay import SIDE_BY_SIDE, SourceReport, side_by_side
from garden.evaluation.shapes import by_shape
from garden.formats.corpora import Collection


def compare(path: Path, pipelines: list[str], baseline: str | None, plot=None, metrics=None, trec_dir=None):
    kwargs = {"measures": list(metrics)} if metrics else {}
    return as_source_report(compare_collection(path, pipelines, baseline, trec_dir=trec_dir, plot=plot, **kwargs),
                            str(path))


def compare_documents(collection: Collection, pipelines: list[str], baseline: str | None, plot=None, metrics=None,
                      trec_dir=None) -> SourceReport:
    """A kind whose source is documents, questions and their relevant documents: read into
    a `Collection`, compared as a collection is, reported as one."""
    kwargs = {"measures": list(metrics)} if metrics else {}
    return as_source_report(compare_loaded(collection, pipelines, baseline, trec_dir=trec_dir, plot=plot, **kwargs),
                            collection.name)


def as_source_report(report, name: str) -> SourceReport:
    tops = {p: {q: [doc for doc, _ in ranking[:SIDE_BY_SIDE]] for q, ranking in run.items()}
            for p, run in report.rankings.items()}
    # a collection's queries are questions too: by shape, though no category is given
    return SourceReport(report, side_by_side(report, tops, report.queries), {},
                        judged_by="the collection's qrels", name=name, baseline=report.baseline,
                        shapes=by_shape(report, report.queries))


KIND = Kind("collection", "collection", compare)
