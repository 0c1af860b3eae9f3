"""The docs site builds under `mkdocs build --strict` (a broken link, a missing anchor or a
reference to a name the code no longer has fails it), its command reference holds every
command the parser has, the pipeline page's diagram is the stage list's, and the README
stays the short front door, its own short diagram naming every stage."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from stage_list import listed_stages

ROOT = Path(__file__).resolve().parents[1]


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "usage: garden query" in cli and "--pipeline" in cli
    # the pipeline page draws every stage of the list, made from it as the site is built
    drawn = (tmp_path / "site" / "pipeline" / "index.html").read_text(encoding="utf-8")
    assert _hooks().DIAGRAM_MARKER not in drawn
    assert all(f"garden/rerank/{name}.py" in drawn for name in listed_stages())
    front = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "The four jobs" in front and 'href="docs/' not in front
    # a `|` escaped for a Markdown table renders as `\|` inside code: no page shows one
    escaped = [page.parent.name for page in (tmp_path / "site").rglob("index.html")
               if "\\|" in page.read_text(encoding="utf-8")]
    assert not escaped, f"pages that show an escaped bar: {escaped}"


def test_the_command_reference_holds_every_command():
    from garden.cli import build_parser

    reference = _hooks().cli_reference()
    parser = build_parser()
    [sub] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for name in sub.choices:
        assert f"## garden {name}\n" in reference and f"usage: garden {name}" in reference


def test_the_readme_is_the_short_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    # the two commands .ci/run and a newcomer run, exactly
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test,milvus]' && .venv/bin/pytest" in lines


def test_the_pipeline_page_draws_no_diagram_of_its_own():
    """The diagram is the stage list's (`garden.rerank.stages.diagram`), put in at build
    time: a hand-drawn one beside it could disagree with the list."""
    page = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert page.count(_hooks().DIAGRAM_MARKER) == 1
    assert not re.search(r"^  -> ", page, re.M), "a hand-drawn diagram on the pipeline page"
    assert _hooks().pipeline_diagram().count("\n  -> ") == len(listed_stages()) + 1   # and the packet


def test_the_readme_diagram_names_every_stage_in_order():
    """The README's short diagram groups stages by hand (`cited / neighbours / ...`); it
    names each stage of the list, in the list's order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("query + as_of + hints + session"):]
    block = block[:block.index("```")]
    named = [name for row in re.findall(r"^  -> (.+?)(?:  |$)", block, re.M) if not row.startswith("packet")
             for name in row.split(" / ")]
    assert named == listed_stages()


def test_the_store_page_lists_the_durable_part_from_its_one_definition():
    from garden.formats.layout import DURABLE

    page = (ROOT / "docs" / "store.md").read_text(encoding="utf-8")
    assert _hooks().DURABLE_MARKER in page
    listed = _hooks().durable_list()
    assert all(f"`{name}/`" in listed for name in DURABLE)
