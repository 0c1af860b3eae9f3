"""Opening a file a user or another file names: a regular file, read with a bound.

A path can name something that is not a file: a FIFO (opening it waits for a writer that
never comes, so the command hangs), a device (`/dev/zero` never ends, so reading it whole
fills memory), a socket. Each reader opens through `open_regular`: the open does not wait
(O_NONBLOCK, so a FIFO opens at once), the opened descriptor is checked to be a regular
file (checked on the descriptor, not the name, so nothing can be swapped in between), and
anything else is refused with one line naming the path and what it is. `read_regular`
also bounds what is read: a file past the bound is refused, never read whole.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from garden.errors import GardenError

# A file changed this recently may change again without its times changing: a file system
# stamps times by a coarse clock (a few milliseconds; a second or two on some), and two
# writes within one of its ticks leave the same times behind.
RACY_NS = 2_000_000_000

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def kind_of(mode: int) -> str:
    """What a stat mode names, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refuse_special(path: str | Path) -> None:
    """GardenError when `path` exists but is not a regular file (a FIFO, a device, a
    folder): for a reader that looks a name up before opening it."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise GardenError(f"{path}: is {kind_of(path.stat().st_mode)}, not a regular file; refused")


def open_regular(path: str | Path, what: str = "file") -> BinaryIO:
    """`path` opened for binary reading, or GardenError: missing, unreadable, or not a
    regular file (see the module docstring)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise GardenError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise GardenError(f"{path}: is a folder, not a {what}") from None
    except OSError as exc:
        raise GardenError(f"{path}: cannot read: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise GardenError(f"{path}: is {kind_of(mode)}, not a regular {what}; refused")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or GardenError."""
    with open_regular(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise GardenError(f"{path}: is {size:,} bytes; a {what} is read only up to {limit:,}")
        data = fh.read(limit + 1)   # the file may have grown since: never read past the bound
    if len(data) > limit:
        raise GardenError(f"{path}: grew past {limit:,} bytes while it was read; a {what} is read only up to that")
    return data
