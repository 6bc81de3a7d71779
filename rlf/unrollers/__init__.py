"""Unrollers: collect ``[T, B]`` experience from a batched environment with an algorithm."""

from rlf.unrollers.async_unroller import ActorError, AsyncUnroller
from rlf.unrollers.sync_unroller import SyncUnroller

__all__ = ["ActorError", "AsyncUnroller", "SyncUnroller"]
