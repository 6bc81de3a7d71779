"""Deprecated: moved to ``rlf.trainers.gin_config`` (below ``rlf.bin`` and ``rlf.experiments``,
which both parse confs). Each name read here warns once and is the new module's; removed in the
next release."""

from __future__ import annotations

from typing import Any

from rlf.trainers import gin_config as _gin_config
from rlf.utils.deprecation import warn_deprecated


def __getattr__(name: str) -> Any:
    value = getattr(_gin_config, name)
    warn_deprecated(f"rlf.bin.gin_utils.{name}", f"rlf.trainers.gin_config.{name}")
    return value
