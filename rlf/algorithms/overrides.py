"""Hooks of rlf 0.1 that the framework no longer calls on the algorithm: a subclass written for
0.1 that overrides one (``summarize_rollout``, ``summarize_train``, ``trains_on_rollout_graph``,
``offline_experience_spec``, ``offline_replay_aliases``) is still called where the framework
now does that work, with a warning naming the replacement, until rlf 0.3."""

from __future__ import annotations

from typing import Any, Optional

from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError

__all__ = ["OVERRIDABLE_0_1_HOOKS", "check_observe_for_replay", "deprecated_override",
           "overrides"]

#: hook -> what replaces overriding it.
OVERRIDABLE_0_1_HOOKS = {
    "summarize_rollout": "TrainingLoop.summarize_rollout (or summaries in after_train_iter)",
    "summarize_train": "algorithm.learner.summarize_train (or summaries in after_update)",
    "trains_on_rollout_graph": "the constructor argument rollout_graph_training",
    "offline_experience_spec": "offline_layout() (its spec)",
    "offline_replay_aliases": "offline_layout() (its aliases)",
}


def overrides(cls: type, name: str) -> bool:
    """Whether a class of ``cls``'s own (one before rlf's base classes in its MRO) defines
    ``name``."""
    for klass in cls.__mro__:
        if vars(klass).get("_rlf_base_class"):
            return False
        if name in vars(klass):
            return True
    return False


def deprecated_override(algorithm, name: str) -> Optional[Any]:
    """``algorithm``'s own ``name`` (a bound method or a property's value) where a class of
    its own (not one of rlf's base classes) defines it: a hook of rlf 0.1 that the framework
    now calls there, with a warning naming the replacement; None where no class does.
    """
    if not overrides(type(algorithm), name):
        return None
    warn_deprecated(f"overriding RLAlgorithm.{name}", OVERRIDABLE_0_1_HOOKS[name])
    return getattr(algorithm, name)


def check_observe_for_replay(cls: type) -> None:
    """Refuses an ``observe_for_replay`` written for rlf 0.1, where the base class's hook stored
    the step it was given: an override that changed the step and passed it to ``super()``
    relabelled what was stored. Since rlf 0.2 the data path stores each step before it calls
    the hook, so such an override would silently store the unchanged step. It is recognised
    as an override whose ``super().observe_for_replay`` call reaches rlf's base class (a call
    that reaches a built-in algorithm's hook, IMPALA's memory, is kept).

    Raises:
        UserError: (a ``ValueError``) naming the class and the way to relabel now.
    """
    mro = cls.__mro__
    for i, klass in enumerate(mro):
        if vars(klass).get("_rlf_base_class"):
            return
        hook = vars(klass).get("observe_for_replay")
        code = getattr(hook, "__code__", None)
        if code is None or not {"super", "observe_for_replay"} <= set(code.co_names):
            continue
        parent = next(k for k in mro[i + 1:] if "observe_for_replay" in vars(k))
        if vars(parent).get("_rlf_base_class"):
            raise UserError(
                f"{klass.__name__}.observe_for_replay calls super().observe_for_replay: since "
                f"rlf 0.2 each step is stored before the hook runs, so a step changed there is "
                f"not what is stored; relabel stored experience in preprocess_experience (or "
                f"a ReplayBuffer subclass as replay_buffer_ctor), and drop the super() call")
