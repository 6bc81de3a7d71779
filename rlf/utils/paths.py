"""Paths as a shell reads them: ``~`` and environment variables expanded, or refused.

A path given to rlf in quotes (``--root_dir '~/runs/x'``), from a conf
(``offline_buffer_dir = "$DATA/replay.pt"``) or through the Python API reaches no shell: taken
as it is, it would make a folder literally named ``~`` in the working directory.
"""

from __future__ import annotations

import os
import re
from typing import Optional, Union

from rlf.utils.errors import UserError

__all__ = ["expand_path", "expand_optional_path"]

_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})")


def expand_path(path: Union[str, os.PathLike], what: str = "the path") -> str:
    """``path`` with a leading ``~`` or ``~user`` and ``$VAR`` / ``${VAR}`` expanded.

    Args:
        path: the path as given.
        what: what gave it, for the message (``"--root_dir"``).

    Returns:
        The expanded path (a ``str``; relative paths stay relative).

    Raises:
        UserError: naming ``what`` for a variable that is not set, or a ``~user`` of no user.
    """
    text = os.fspath(path)
    expanded = os.path.expandvars(os.path.expanduser(text))
    unset = _VARIABLE.search(expanded)
    if unset:
        name = unset.group(1).strip("{}")
        raise UserError(f"{what} {text}: the environment variable {name} is not set; set it "
                        f"or give the path itself")
    if expanded.startswith("~"):
        user = expanded[1:].split(os.sep, 1)[0]
        raise UserError(f"{what} {text}: ~{user} names no user of this machine; give the "
                        f"path itself")
    return expanded


def expand_optional_path(path: Optional[Union[str, os.PathLike]], what: str = "the path"
                         ) -> Optional[str]:
    """``expand_path`` of ``path``, or None for None."""
    return None if path is None else expand_path(path, what)
