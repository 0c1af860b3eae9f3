"""One-line warnings on stderr for what the garden healed or skipped and the user should know."""
from __future__ import annotations

import sys


def warn(message: str) -> None:
    """Print `garden: warning: MESSAGE` as one line: a newline inside would split it."""
    text = " ".join(str(message).split("\n"))
    print(f"garden: warning: {text}", file=sys.stderr, flush=True)
