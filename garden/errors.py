"""Errors that reach a user as one located line each, never a traceback."""
from __future__ import annotations


class GardenError(Exception):
    """Bad input: each message names the file, the record or line, the field and the value.

    `status` is the exit code the command line uses: 2 for bad input, 1 for a story that
    `garden check` found invalid.
    """

    def __init__(self, messages: str | list[str], status: int = 2):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        self.status = status
        super().__init__("\n".join(self.messages))


class StoryError(GardenError):
    """A story failed validation; every error found is listed at once."""

    def __init__(self, messages: list[str]):
        super().__init__(messages, status=1)
