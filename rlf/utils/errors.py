"""``UserError``: the base of every error that a user's input causes, as opposed to a bug."""

from __future__ import annotations

import re

__all__ = ["UserError", "one_line"]


class UserError(ValueError):
    """A mistake in what the user gave rlf: a configuration value, a file, an environment id,
    a run directory. The command-line tools print its message as one line and exit with
    status 2 (with the traceback under ``--debug`` or ``RLF_DEBUG=1``); any other exception
    is a bug in rlf and keeps its traceback. A ``ValueError``, so code that catches those
    keeps working."""


def one_line(error: BaseException) -> str:
    """The error's message as one line: gin's "In call to configurable ..." notes dropped
    (the messages name what they are about), other lines joined, whitespace collapsed."""
    text = str(error).strip() or type(error).__name__
    text = re.sub(r"\s*In call to configurable '[^']*' \([^\n]*\)", "", text)
    return " ".join(text.split())
