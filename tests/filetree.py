"""What a folder holds, for tests that compare two imports or two runs byte for byte."""
from __future__ import annotations

from pathlib import Path


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by its path relative to it, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
