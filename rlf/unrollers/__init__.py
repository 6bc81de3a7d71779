"""Unrollers: collect ``[T, B]`` experience from batched environments with an algorithm.

``Unroller`` is the interface; ``SyncUnroller`` acts in the learner's process; the
``ActorUnroller`` transports act in actor processes (``AsyncUnroller``) or Ray actors
(``rlf.unrollers.ray_unroller.RayUnroller``, imported on demand: Ray is optional).
"""

from rlf.unrollers.actor_failures import ActorError, RestartPolicy
from rlf.unrollers.actor_unroller import ActorUnroller
from rlf.unrollers.async_unroller import AsyncUnroller
from rlf.unrollers.sync_unroller import SyncUnroller
from rlf.unrollers.unroller import Unroller, UnrollerFactory

__all__ = ["ActorError", "ActorUnroller", "AsyncUnroller", "RestartPolicy", "SyncUnroller",
           "Unroller", "UnrollerFactory"]
