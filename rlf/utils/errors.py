"""``UserError``: the base of every error that a user's input causes, as opposed to a bug."""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

__all__ = ["ConfigWarning", "UserError", "one_line", "one_line_user_errors"]


class ConfigWarning(FutureWarning):
    """A setting that still works but will not for long (an old name, a removed ALF field).
    The command-line tools print it as one ``warning:`` line; its location would be gin's
    code, not the user's conf."""


class UserError(ValueError):
    """A mistake in what the user gave rlf: a configuration value, a file, an environment id,
    a run directory. The command-line tools print its message as one line and exit with
    status 2 (with the traceback under ``--debug`` or ``RLF_DEBUG=1``); any other exception
    is a bug in rlf and keeps its traceback. A ``ValueError``, so code that catches those
    keeps working."""


_GIN_NOTE = r"\s*In call to configurable '([^']*)' \([^\n]*\)"


def one_line(error: BaseException) -> str:
    """The error's message as one line: gin's "In call to configurable ..." notes dropped,
    other lines joined, whitespace collapsed. A message from outside rlf (not a
    ``UserError``) that does not name the innermost configurable gets its name in front: a
    library's "Invalid learning rate: -1" becomes "Adam: Invalid learning rate: -1"."""
    text = str(error).strip() or type(error).__name__
    called = re.findall(_GIN_NOTE, text)
    text = re.sub(_GIN_NOTE, "", text)
    if called and called[0] not in text and not isinstance(error, UserError):
        text = f"{called[0]}: {text}"
    return " ".join(text.split())


@contextlib.contextmanager
def one_line_user_errors() -> Iterator[None]:
    """Within the block, a ``UserError`` leaves as one line (``one_line``: gin's notes of
    the configurables it passed through dropped), of its own class where that class takes a
    message alone: what the Python API raises, as the command line prints it."""
    try:
        yield
    except UserError as e:
        message = one_line(e)
        if message == str(e):
            raise
        try:
            clean = type(e)(message)
        except TypeError:
            clean = UserError(message)
        raise clean from e

