"""Hooks of rlf 0.1 that the framework no longer calls on the algorithm: a subclass written for
0.1 that overrides one (``summarize_rollout``, ``summarize_train``, ``trains_on_rollout_graph``,
``offline_experience_spec``, ``offline_replay_aliases``) is still called where the framework
now does that work, with a warning naming the replacement, until rlf 0.3."""

from __future__ import annotations

from typing import Any, Optional

from rlf.utils.deprecation import warn_deprecated

__all__ = ["OVERRIDABLE_0_1_HOOKS", "deprecated_override"]

#: hook -> what replaces overriding it.
OVERRIDABLE_0_1_HOOKS = {
    "summarize_rollout": "TrainingLoop.summarize_rollout (or summaries in after_train_iter)",
    "summarize_train": "algorithm.learner.summarize_train (or summaries in after_update)",
    "trains_on_rollout_graph": "the constructor argument rollout_graph_training",
    "offline_experience_spec": "offline_layout() (its spec)",
    "offline_replay_aliases": "offline_layout() (its aliases)",
}


def deprecated_override(algorithm, name: str) -> Optional[Any]:
    """``algorithm``'s own ``name`` (a bound method or a property's value) where a class of
    its own (not one of rlf's base classes) defines it: a hook of rlf 0.1 that the framework
    now calls there, with a warning naming the replacement; None where no class does.
    """
    for klass in type(algorithm).__mro__:
        if vars(klass).get("_rlf_base_class"):
            return None
        if name in vars(klass):
            warn_deprecated(f"overriding RLAlgorithm.{name}", OVERRIDABLE_0_1_HOOKS[name])
            return getattr(algorithm, name)
    return None
