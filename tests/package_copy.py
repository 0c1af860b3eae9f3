"""A project whose `garden` package is a copy, for tests that add a module the way a
contributor would (docs/extending.md) and run the command line on the result."""
from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_CLI = "import sys; from garden.cli import main; sys.exit(main(sys.argv[1:]))"


def copy_project(root: Path) -> Path:
    """The shipped stories and cases and a copy of the package under `root`."""
    for name in ("fixtures", "regression", "challenge"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copytree(ROOT / "garden", root / "garden", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def worked_example(section: str) -> str:
    """The first Python block under `section` of docs/extending.md."""
    page = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", page[page.index(section):], re.S).group(1)


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "GARDEN_HOME": str(root / ".garden"), "GARDEN_TRACE": "0", "PYTHONPATH": str(root)}


def garden_in(root: Path, *args: str) -> tuple[int, str, str]:
    """`garden ARGS` run on the copy (its folder first on the path), in `root`."""
    done = subprocess.run([sys.executable, "-c", RUN_CLI, *args], cwd=root, env=env_for(root),
                          capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout, done.stderr


def python_in(root: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env_for(root), capture_output=True,
                          text=True, timeout=300)


def add_line_after(path: Path, after: str, line: str) -> None:
    """Write `line` into the file after the line `after`, and check that the file's one
    change is that line: a registration is one line in a list."""
    before = path.read_text(encoding="utf-8")
    changed = before.replace(f"{after}\n", f"{after}\n{line}\n", 1)
    path.write_text(changed, encoding="utf-8")
    diff = [d for d in difflib.unified_diff(before.splitlines(), changed.splitlines(), lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert diff == [f"+{line}"], "one line in the list"
