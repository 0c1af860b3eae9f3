"""Where derived data lives: indexes, embedding caches, traces. All of it is disposable."""
from __future__ import annotations

import os
from pathlib import Path


def derived_dir() -> Path:
    """`$GARDEN_HOME` if set, else `.garden/` under the current directory."""
    home = os.environ.get("GARDEN_HOME")
    return Path(home) if home else Path.cwd() / ".garden"
