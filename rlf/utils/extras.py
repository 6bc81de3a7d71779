"""Optional dependencies (setup.py's extras): one place to import them, so that a missing one
is one line naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from rlf.utils.errors import UserError

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(UserError, ImportError):
    """An optional dependency is not installed. A ``UserError`` (the command lines print one
    line and exit with status 2) and an ``ImportError`` (code that falls back without the
    dependency keeps catching it)."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Imports ``module`` of the extra ``extra`` for ``purpose``.

    Args:
        module: e.g. ``"ray"`` or ``"rliable.library"``.
        extra: the setup.py extra that installs it (``"ray"``, ``"suite"``, ...).
        purpose: what needs it, for the message (``"TrainerConfig.use_ray"``).

    Returns:
        The module.

    Raises:
        MissingExtraError: naming ``purpose``, the missing package and
            ``pip install -e '.[extra]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None) or module.split(".")[0]
        raise MissingExtraError(f"{purpose} needs {missing}, which is not installed: "
                                f"pip install -e '.[{extra}]' (from rlf's checkout)") from None
