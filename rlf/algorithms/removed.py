"""The members of rlf 0.1's ``Algorithm`` and ``RLAlgorithm`` that rlf 0.3 removed, each with
its replacement: a subclass defining a removed hook is refused at construction, reading a
removed member raises an ``AttributeError`` naming it, and an ``observe_for_replay`` written
for 0.1's store-time relabelling is refused. A method of a subclass's own that happens to bear
a removed hook's name is marked ``@own_method`` and kept.
"""

from __future__ import annotations

from typing import Callable, Dict, TypeVar

from rlf.utils.errors import UserError

__all__ = ["REMOVED_HOOKS", "REMOVED_MEMBERS", "check_observe_for_replay", "check_removed_hooks",
           "own_method", "removed_member_error"]

_LOOP = "algorithm.training_loop"

#: The 0.1 methods and properties the framework called on the algorithm -> the replacement.
REMOVED_HOOKS: Dict[str, str] = {
    "summarize_rollout": "summaries in after_train_iter (TrainingLoop.summarize_rollout "
                         "writes the rollout's)",
    "summarize_train": "summaries in after_update (Learner.summarize_train writes the "
                       "parameters' and gradients')",
    "trains_on_rollout_graph": "the constructor argument rollout_graph_training",
    "offline_experience_spec": "offline_layout() returning OfflineLayout(spec, aliases)",
    "offline_replay_aliases": "offline_layout() returning OfflineLayout(spec, aliases)",
    "train_from_unroll": "train_iter() (the data path's observe and batches)",
    "train_from_replay_buffer": "train_iter() (the data path's batches)",
    "train_epochs": "preprocess_experience or mix_experience (MiniBatches.epochs cuts the "
                    "mini-batches)",
    "update_with_gradient": "calc_loss returning LossInfo (algorithm.learner updates)",
    "unroll": f"{_LOOP}.unroll",
    "set_unroller": f"{_LOOP}.set_unroller",
    "summarize_metrics": f"{_LOOP}.summarize_metrics",
    "observe_for_metrics": f"{_LOOP}.observe_for_metrics",
    "update_observation_normalizers": f"{_LOOP}.update_observation_normalizers",
    "finish_train": f"{_LOOP}.close",
    "check_training_settings": "rlf.algorithms.TrainingLoop(algorithm) (building it checks "
                               "the settings)",
    "get_metrics": f"{_LOOP}.metrics",
    "get_step_metrics": f"{_LOOP}.metrics[:2]",
    "load_offline_replay_buffer": "no call (build_training loads the offline data the "
                                  "config names)",
    "replay_buffer_state_dict": f"{_LOOP}.replay_buffer_state_dict",
    "load_replay_buffer_state_dict": f"{_LOOP}.load_replay_buffer_state_dict",
    "rollout_info_spec_probe": "offline_layout().spec.rollout_info",
    "load_initial_checkpoint": "rlf.algorithms.algorithm_state.load_initial_checkpoint"
                               "(algorithm)",
    "actor_state_dict": "rlf.unrollers.actor_params.actor_state_dict(algorithm)",
    "set_actor_index": "algorithm.actor_identity = "
                       "rlf.unrollers.actor_params.ActorIdentity(index, num_actors)",
    "has_multidim_reward": "algorithm.reward_spec.numel > 1",
}

#: Every removed member (the hooks and the plain attributes, whose names are free for a
#: subclass again) -> the replacement.
REMOVED_MEMBERS: Dict[str, str] = {
    **REMOVED_HOOKS,
    "optimizers": "algorithm.learner.optimizers",
    "optimizer_names": "algorithm.learner.names",
    "optimizer_steps": "algorithm.learner.optimizer_steps",
    "config": "the config your constructor receives (keep a reference of your own)",
    "env": "the env your constructor receives (keep a reference of your own)",
    "reward_weights": "the reward_weights your constructor receives (weighted_reward "
                      "applies them)",
    "actor_index": "algorithm.actor_identity.index (None on the learner)",
    "num_actors": "algorithm.actor_identity.num_actors (None on the learner)",
    "data_path": f"{_LOOP}.data_path.name",
    "unroller": f"{_LOOP}.unroller",
    "rollout_info_spec": f"{_LOOP}.rollout_info_spec",
    "replay_buffer": f"{_LOOP}.replay_buffer",
    "offline_replay_buffer": f"{_LOOP}.offline_replay_buffer",
}

_F = TypeVar("_F", bound=Callable)


def own_method(method: _F) -> _F:
    """Marks a subclass's method (or a property's getter, under ``@property``) whose name was
    a hook of rlf 0.1 (``REMOVED_HOOKS``: ``unroll``, ``get_metrics``, ...) as the subclass's
    own, which rlf never calls: ``check_removed_hooks`` then keeps it.

    Example::

        class Dyna(RLAlgorithm):
            @own_method
            def unroll(self, model, steps):  # a model rollout, not rlf 0.1's hook
                ...

    Returns:
        ``method`` itself, marked.
    """
    method._rlf_own_method = True  # type: ignore[attr-defined]
    return method


def _is_own(member) -> bool:
    """Whether ``member`` (a function, property, static or class method) is marked
    ``own_method``."""
    for f in (member, getattr(member, "fget", None), getattr(member, "__func__", None)):
        if getattr(f, "_rlf_own_method", False):
            return True
    return False


def check_removed_hooks(cls: type) -> None:
    """Refuses a subclass of rlf's base classes whose own classes (those before the first
    class marked ``_rlf_base_class`` in its MRO) define a hook of ``REMOVED_HOOKS``, unless
    it is marked ``own_method``.

    Raises:
        UserError: (a ``ValueError``) naming the class, the hook, its replacement and how to
            keep a method of one's own by that name.
    """
    for klass in cls.__mro__:
        if vars(klass).get("_rlf_base_class"):
            return
        for name, member in vars(klass).items():
            if name in REMOVED_HOOKS and not _is_own(member):
                raise UserError(f"{klass.__name__}.{name}: rlf 0.3 no longer calls this hook of "
                                f"rlf 0.1 (removed); use {REMOVED_HOOKS[name]} (a method of your "
                                f"own by this name: mark it @rlf.algorithms.own_method)")


def removed_member_error(obj, name: str) -> AttributeError:
    """The ``AttributeError`` for reading ``name`` on ``obj``: naming the replacement where
    ``name`` is a removed member, torch's plain message otherwise."""
    message = f"'{type(obj).__name__}' object has no attribute '{name}'"
    if name in REMOVED_MEMBERS:
        message += f" (removed in rlf 0.3; use {REMOVED_MEMBERS[name]})"
    return AttributeError(message)


def check_observe_for_replay(cls: type) -> None:
    """Refuses an ``observe_for_replay`` whose ``super()`` call reaches rlf's base classes
    (which since rlf 0.4 define none): in rlf 0.1 that stored the changed step; since 0.2 each
    step is stored before the hook runs.

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
        parent = next((k for k in mro[i + 1:] if "observe_for_replay" in vars(k)), None)
        if parent is None:
            raise UserError(
                f"{klass.__name__}.observe_for_replay calls super().observe_for_replay: since "
                f"rlf 0.2 each step is stored before the hook runs, so a step changed there is "
                f"not what is stored; relabel stored experience in preprocess_experience (or "
                f"a ReplayBuffer subclass as replay_buffer_ctor), and drop the super() call")
