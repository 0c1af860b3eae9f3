"""Adding a stage is one file and one line: the worked example of docs/extending.md,
taken from the page, written into a copy of the package beside one added line in the
stage list, and seen everywhere a stage shows: `garden pipelines`, the schemas, a case's
settings and labels, `garden ablate`, the explorer and the pipeline page's diagram. Nothing
else is edited but the README's short diagram, which groups the stages by hand and gains
its name: in the copy, once `garden schemas` has regenerated the schemas, the tests that pin
the stages, the schemas, the layers and the docs pass as they are (not the whole suite)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from package_copy import ROOT, add_line_after, copy_project, env_for, garden_in, python_in, worked_example

CASE = """id: fresh
story: aurora-ridge
as_of: 2030-01-06
query: Why have I not felt like gaming recently?
settings: {recent_days: 30}
expect:
  lead: state.mira.gaming
  labels: {state.mira.gaming: [recent]}
"""


@pytest.fixture(scope="module")
def garden_with_recent(tmp_path_factory):
    """A project whose `garden` package is a copy with the `recent` stage added."""
    root = copy_project(tmp_path_factory.mktemp("with-recent"))
    (root / "garden" / "rerank" / "recent.py").write_text(worked_example("## Adding a stage"), encoding="utf-8")
    add_line_after(root / "garden" / "rerank" / "stages.py", '    "session",', '    "recent",')
    (root / "mine").mkdir()
    (root / "mine" / "fresh.yaml").write_text(CASE, encoding="utf-8")
    return root


garden = garden_in


def test_the_copy_is_the_one_that_runs(garden_with_recent):
    done = python_in(garden_with_recent, "import garden.rerank.recent, garden; print(garden.__file__)")
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == garden_with_recent / "garden"


def test_the_new_stage_is_in_pipelines_and_schemas(garden_with_recent):
    code, out, err = garden(garden_with_recent, "pipelines", "--json")
    assert code == 0, err
    assert "session -> recent -> sittings -> standout" in json.loads(out)["default"]
    code, _, err = garden(garden_with_recent, "schemas", "--out", "out")
    assert code == 0, err
    case_schema = json.loads((garden_with_recent / "out" / "case.schema.json").read_text(encoding="utf-8"))
    recent_days = case_schema["$defs"]["Settings"]["properties"]["recent_days"]
    assert "within this many days" in recent_days["description"]


def test_its_setting_and_label_reach_a_case_and_ablate_measures_it(garden_with_recent):
    code, out, err = garden(garden_with_recent, "run", "mine/fresh.yaml", "--json")
    assert code == 0, err
    assert json.loads(out)["results"][0]["passed"] is True
    # without the stage the label is missing: that is what it decides
    code, out, err = garden(garden_with_recent, "ablate", "mine", "--stages", "recent", "--json")
    assert code == 0, err
    assert json.loads(out)["stages"]["recent"]["decides"] == ["fresh"]
    # its setting is checked against its bounds, and refused where no stage reads it
    bad = garden_with_recent / "mine-bad"
    bad.mkdir(exist_ok=True)
    (bad / "fresh.yaml").write_text(CASE.replace("recent_days: 30", "recent_days: 0"), encoding="utf-8")
    code, _, err = garden(garden_with_recent, "run", "mine-bad/fresh.yaml")
    assert code == 2 and "recent_days" in err and "greater than or equal to 1" in err
    script = ("import garden\n"
              "try:\n"
              "    garden.query('aurora-ridge', 'gaming', pipeline='bm25', settings={'recent_days': 5})\n"
              "except garden.GardenError as e:\n"
              "    print(e)\n")
    done = python_in(garden_with_recent, script)
    assert "pipeline bm25 has no stage that uses 'recent_days'" in done.stdout, done.stdout + done.stderr


def test_the_explorer_draws_its_step(garden_with_recent):
    code, _, err = garden(garden_with_recent, "explore", "--case", "mine/fresh.yaml", "--out", "page.html")
    assert code == 0, err
    assert "Recent: what appeared lately" in (garden_with_recent / "page.html").read_text(encoding="utf-8")


# the tests that pin what a stage touches: the stage list and its order, the generated
# schemas, the layers, the docs (their site builds strictly)
PINNING = ("tests/test_stages.py", "tests/test_schemas.py", "tests/test_layers.py", "tests/test_docs.py")


def test_the_tests_that_pin_a_stage_pass_in_the_copy_once_the_schemas_are_regenerated(garden_with_recent):
    root = garden_with_recent / "whole"
    shutil.copytree(garden_with_recent, root, ignore=shutil.ignore_patterns("__pycache__", ".garden", "mine*", "out",
                                                                         "page.html", "whole"))
    for name in ("tests", "docs", "schemas", "notebooks"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "out"))
    for name in ("mkdocs.yml", "conftest.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, root / name)
    # the README's short diagram groups the stages by hand, and names each (tests/test_docs.py):
    # the stage's name is added to its group there, the one word beside the module and the line
    readme = root / "README.md"
    before = readme.read_text(encoding="utf-8")
    after = before.replace("  -> session / sittings", "  -> session / recent / sittings", 1)
    assert after != before
    readme.write_text(after, encoding="utf-8")
    stale = subprocess.run([sys.executable, "-m", "pytest", "tests/test_schemas.py", "-n", "0", "-q", "-p",
                            "no:cacheprovider"], cwd=root, env=env_for(root), capture_output=True, text=True,
                           timeout=600)
    assert stale.returncode == 1 and "is stale: run `garden schemas`" in stale.stdout, stale.stdout[-2000:]
    code, _, err = garden_in(root, "schemas")   # the one command that regenerates them
    assert code == 0, err
    assert "recent_days" in (root / "schemas" / "case.schema.json").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", *PINNING, "-n", "0", "-v", "-p", "no:cacheprovider"],
                          cwd=root, env=env_for(root), capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    ran = {line.split("::")[0] for line in done.stdout.splitlines() if " PASSED" in line}
    assert ran == set(PINNING), ran
