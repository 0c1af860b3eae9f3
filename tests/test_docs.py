"""The docs site builds under `mkdocs build --strict` (a broken link, a missing anchor or a
reference to a name the code no longer has fails it), its command reference holds every
command the parser has, and the README stays the short front door."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

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


def test_the_store_page_lists_the_durable_part_from_its_one_definition():
    from garden.formats.layout import DURABLE

    page = (ROOT / "docs" / "store.md").read_text(encoding="utf-8")
    assert _hooks().DURABLE_MARKER in page
    listed = _hooks().durable_list()
    assert all(f"`{name}/`" in listed for name in DURABLE)
