"""Errors that reach a user as one located line each, never a traceback.

The exit-code contract every command holds: 0 success; 1 a check or a regression failed
(`garden check` found an invalid story, `garden run` a failing regression case,
`garden promote` a case that did not pass); 2 bad input or usage (a file, an option, an
environment variable or a story the command was given and cannot use).
"""
from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class GardenError(Exception):
    """Bad input: each message names the file, the record or line, the field and the value.

    `status` is the exit code the command line uses: 2 (bad input) unless the command
    raising it is reporting a failed check (1).
    """

    def __init__(self, messages: str | list[str], status: int = EXIT_BAD_INPUT):
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        self.status = status
        super().__init__("\n".join(self.messages))


class StoryError(GardenError):
    """A story failed validation; every error found is listed at once. To `garden check`
    that is its finding (exit 1); to every other command the story is bad input (exit 2)."""

    def __init__(self, messages: list[str]):
        super().__init__(messages, status=EXIT_BAD_INPUT)
