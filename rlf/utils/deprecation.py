"""Deprecated names: old parameter names and methods keep working for one release, with one
warning per name that names the replacement."""

from __future__ import annotations

import warnings
from typing import Any, Set, Tuple

from rlf.utils.errors import ConfigWarning, UserError

__all__ = ["renamed", "warn_deprecated"]

_warned: Set[Tuple[str, str]] = set()


def renamed(owner: str, new: str, value: Any, old: str, old_value: Any, default: Any) -> Any:
    """The value of parameter ``new`` given that it may still be passed as ``old``.

    Args:
        owner: the class or function, for the messages (``"ImpalaAlgorithm"``).
        new, value: the parameter's name and the value passed for it (``default`` if not
            passed).
        old, old_value: the deprecated name and the value passed for it (None if not
            passed).
        default: ``new``'s default.

    Returns:
        ``old_value`` if only the old name was given (with a ``ConfigWarning``, once per
        owner and name), else ``value``.

    Raises:
        UserError: if both names were given different values.
    """
    if old_value is None:
        return value
    if value != default and value != old_value:
        raise UserError(f"{owner}: {old} (deprecated) and {new} are both set ({old_value!r}, "
                        f"{value!r}); set {new} only")
    if (owner, old) not in _warned:
        _warned.add((owner, old))
        warnings.warn(f"{owner}.{old} is deprecated; use {owner}.{new} (the same quantity, "
                      f"ALF's name)", ConfigWarning, stacklevel=3)
    return old_value


def warn_deprecated(name: str, replacement: str, stacklevel: int = 3) -> None:
    """Warns once per ``name`` that it is deprecated and removed in the next release.

    Args:
        name: the deprecated function or method (``"RLAlgorithm.train_from_unroll"``).
        replacement: what to use instead, in words.
        stacklevel: ``warnings.warn``'s, counted from this function's caller's caller
            (3: the code that called the deprecated function).
    """
    if ("", name) not in _warned:
        _warned.add(("", name))
        warnings.warn(f"{name} is deprecated and will be removed in the next release; use "
                      f"{replacement}", DeprecationWarning, stacklevel=stacklevel)
