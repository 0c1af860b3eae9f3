"""A retriever from an installed distribution joins the registry through its entry point."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from garden.errors import GardenError
from garden.retrievers import Doc, make_retriever, rank, registered, registry

PLUGIN_MODULE = '''
"""A toy retriever: counts how many query words a document holds."""


class WordCount:
    description = "toy retriever counting shared words"

    def __init__(self, bonus=0.0):
        self.name = "toy-count"
        self.bonus = bonus
        self.docs = []

    def index(self, docs):
        self.docs = [(d.id, set(d.text.lower().split())) for d in docs]

    def score(self, query):
        words = set(query.lower().split())
        scores = {doc_id: len(words & terms) + self.bonus for doc_id, terms in self.docs}
        return {doc_id: float(s) for doc_id, s in scores.items() if s > self.bonus}
'''


@pytest.fixture
def site(tmp_path):
    """A folder that looks like site-packages holding one installed plugin distribution."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "garden_toy_plugin.py").write_text(PLUGIN_MODULE)
    dist = root / "garden_toy_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: garden-toy-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""\
        [garden.retrievers]
        toy-count = garden_toy_plugin:WordCount
        toy-broken = garden_toy_plugin_missing:Nothing
        """))
    (dist / "RECORD").write_text("")
    return root


@pytest.fixture
def fresh_registry(site, monkeypatch):
    """The registry as a new process would build it with `site` installed; the real one is
    put back afterwards."""
    monkeypatch.syspath_prepend(str(site))
    with registry.scoped():
        registry.load_plugins()
        yield registry
    sys.modules.pop("garden_toy_plugin", None)


def test_an_installed_plugin_is_registered(fresh_registry):
    known = fresh_registry.entries()
    assert "toy-count" in known
    assert known["toy-count"].description == "toy retriever counting shared words"
    assert known["toy-count"].origin == "plugin garden-toy-plugin"
    assert {"bm25", "bm25s", "tfidf", "dense", "hybrid"} <= set(known)


def test_a_plugin_retriever_indexes_and_scores(fresh_registry):
    retriever = make_retriever("toy-count", bonus=0.5)
    retriever.index([Doc("a", "amber lantern"), Doc("b", "lantern harbour lantern"), Doc("c", "granite")])
    assert rank(retriever.score("amber lantern")) == [("a", 2.5), ("b", 1.5)]


def test_a_plugin_can_be_fused_with_a_builtin(fresh_registry):
    hybrid = make_retriever("hybrid", retrievers=("toy-count", "bm25s"))
    hybrid.index([Doc("a", "amber lantern"), Doc("b", "granite quarry")])
    assert set(hybrid.components("lantern")) == {"toy-count", "bm25s"}
    assert rank(hybrid.score("lantern"))[0][0] == "a"


def test_a_broken_plugin_is_listed_and_fails_clearly_when_used(fresh_registry):
    known = fresh_registry.entries()
    assert known["toy-broken"].description.startswith("(failed to load")
    with pytest.raises(GardenError, match="'toy-broken' is registered but failed to load"):
        make_retriever("toy-broken")


def test_the_registry_is_restored_after_the_plugin_tests():
    assert "toy-count" not in registered()


def test_a_new_process_finds_the_plugin_through_pythonpath(site):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    script = (
        "from garden.retrievers import registered, make_retriever, Doc\n"
        "print(registered()['toy-count'].origin)\n"
        "r = make_retriever('toy-count')\n"
        "r.index([Doc('x', 'lantern'), Doc('y', 'quarry')])\n"
        "print(sorted(r.score('lantern').items()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["plugin garden-toy-plugin", "[('x', 1.0)]"]


def test_garden_pipelines_lists_the_plugin_and_a_query_runs_on_it(site, tmp_path):
    env = dict(os.environ, GARDEN_HOME=str(tmp_path / ".garden"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    garden = str(Path(sys.executable).parent / "garden")
    listed = subprocess.run([garden, "pipelines"], env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert {"toy-count", "bm25", "bm25s", "tfidf", "dense", "hybrid", "default"} <= names
    story = Path(__file__).resolve().parents[1] / "fixtures" / "aurora-ridge.yaml"
    ran = subprocess.run([garden, "query", str(story), "paper log", "--pipeline", "toy-count", "--json"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["items"], "the plugin retriever found the records that say the words"


def test_a_plugin_that_raises_fails_its_contrast_column_only(fresh_registry, tmp_path, monkeypatch):
    from garden.evaluation.runner import contrast

    class Exploding:
        description = "raises on every query"

        def __init__(self):
            self.name = "exploding"

        def index(self, docs):
            pass

        def score(self, query):
            raise RuntimeError("boom")

    fresh_registry.add("exploding", Exploding, origin="plugin test")
    monkeypatch.setenv("GARDEN_HOME", str(tmp_path / ".garden"))
    case = Path(__file__).resolve().parents[1] / "regression" / "budget.yaml"
    report = contrast([str(case)])
    cell = report.cells[("budget", "exploding")]
    assert not cell.passed and "raised RuntimeError: boom" in cell.main.failures[0]
    assert report.cells[("budget", "default")].passed
    assert "toy-broken" in report.unavailable
