"""Adding a retriever is one file carrying its one registration: the worked example of
docs/extending.md, taken from the page and written into a copy of the package, is listed,
runs bare with and without options, is measured by `garden compare` and fuses in
`hybrid`. Nothing else is edited."""
from __future__ import annotations

import json

import pytest

from package_copy import copy_project, garden_in, worked_example


@pytest.fixture(scope="module")
def garden_with_overlap(tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("with-overlap"))
    (root / "garden" / "retrievers" / "overlap.py").write_text(worked_example("## Adding a retriever"),
                                                                encoding="utf-8")
    return root


def test_it_is_listed_and_runs_bare_with_its_options(garden_with_overlap):
    code, out, err = garden_in(garden_with_overlap, "pipelines", "--json")
    assert code == 0, err
    assert "share of the query's analyzed words" in json.loads(out)["overlap"]
    for pipeline in ("overlap", "overlap:stem=false"):
        code, out, err = garden_in(garden_with_overlap, "query", "aurora-ridge", "camp stove fuel", "--pipeline",
                                   pipeline, "--json")
        assert code == 0, err
        assert json.loads(out)["items"], pipeline
    code, _, err = garden_in(garden_with_overlap, "query", "aurora-ridge", "camp", "--pipeline", "overlap:stem=2")
    assert code == 2 and "stem" in err


def test_compare_measures_it_and_hybrid_fuses_it(garden_with_overlap):
    code, out, err = garden_in(garden_with_overlap, "compare", "regression/similar-wording.yaml",
                               "--pipelines", "bm25,overlap", "--json")
    assert code == 0, err
    assert set(json.loads(out)["pipelines"]) == {"bm25", "overlap"}
    code, out, err = garden_in(garden_with_overlap, "query", "aurora-ridge", "camp stove fuel", "--pipeline",
                               "hybrid:retrievers=overlap+bm25", "--json")
    assert code == 0, err
    assert json.loads(out)["items"]
