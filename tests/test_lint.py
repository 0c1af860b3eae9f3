"""The tree is clean under the stated lint rules (pyproject.toml, [tool.ruff]): pyflakes,
pycodestyle's errors and warnings, lines up to 120 characters. An unused import, an
undefined name or a shadowed test fails the suite, not a later reader."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean_on_the_whole_tree():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All checks passed" in done.stdout
