"""What a learner sends its actors: the tensors an algorithm's copy needs to act, and which actor
a copy is.

``actor_state_dict(algorithm)`` is what the actor unrollers copy from the learner to every
actor at each parameter update; ``ActorIdentity`` is what ``build_actor`` gives each copy
(``RLAlgorithm.actor_identity``).
"""

from __future__ import annotations

import weakref
from typing import Any, Dict

import torch
from torch import nn

from rlf.data_structures import ActorIdentity  # (defined there; importable from here)
from rlf.utils.errors import UserError

__all__ = ["ActorIdentity", "COUNTERS_KEY", "actor_state_dict", "register_counters"]

#: The key of the counters in ``actor_state_dict()``.
COUNTERS_KEY = "_counters"

#: algorithm -> a weak reference to its optimizer set (held weakly both ways).
_COUNTED: "weakref.WeakKeyDictionary[Any, weakref.ref]" = weakref.WeakKeyDictionary()


def register_counters(algorithm: Any, optimizers: Any) -> None:
    """Records ``optimizers`` (its ``OptimizerSet``: ``optimizers`` builds them, ``counters``
    counts) as those whose counters travel with ``algorithm``'s parameters under
    ``COUNTERS_KEY``; each algorithm's ``OptimizerSet`` registers itself when made. Neither
    is kept alive by it."""
    _COUNTED[algorithm] = weakref.ref(optimizers)


def actor_state_dict(algorithm) -> Dict[str, torch.Tensor]:
    """The tensors an actor's copy of ``algorithm`` needs to act as it does: the parameters and
    buffers of ``algorithm.actor_modules()`` (the sub-modules ``rollout_step`` runs) and the
    algorithm's own (those of no sub-module: bounds, a temperature), by ``nn.Module`` name,
    and the counters under ``COUNTERS_KEY`` (``num_updates``, ``EnvironmentSteps``, the
    iteration and each optimizer's steps, one CPU ``int64`` tensor), so that a
    ``rollout_step`` on an actor reads the learner's values as of the parameters it acts with.

    The tensors are the algorithm's own (not copies): the unrollers copy them in place.

    Args:
        algorithm: an ``RLAlgorithm``.

    Returns:
        ``{name: tensor}``.
    """
    prefixes = tuple(f"{n}." for n in algorithm.actor_modules())
    own = {n for n, _ in algorithm.named_parameters(recurse=False)} | {
        n for n, _ in algorithm.named_buffers(recurse=False)}
    params = {k: v for k, v in nn.Module.state_dict(algorithm, keep_vars=True).items()
              if isinstance(v, torch.Tensor) and (k.startswith(prefixes) or k in own)}
    ref = _COUNTED.get(algorithm)
    optimizers = None if ref is None else ref()
    if optimizers is None:
        raise UserError(f"{type(algorithm).__name__} has no optimizer set registered (an "
                        f"rlf Algorithm registers its own when made), so its counters are "
                        f"unknown; make it with its constructor")
    try:
        optimizers.optimizers  # noqa: B018 (sizes the optimizers' step counts)
    except UserError:
        pass  # parameters without an optimizer: no step counts (the learner's alike)
    params[COUNTERS_KEY] = optimizers.counters.tensor
    return params
