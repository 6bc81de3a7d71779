"""The members that ``Algorithm`` and ``RLAlgorithm`` had in rlf 0.1 and no longer have: each still
works for one release, with one ``DeprecationWarning`` naming its replacement, and is removed in
rlf 0.3 (the deprecation rule of ``CHANGELOG.md``).

Each is a class attribute of ``Algorithm`` (``DeprecatedMember``, installed by
``install_deprecated_members``), so that a subclass reaches it through ``super()`` as well as
through ``self``; an instance attribute or sub-module of the same name takes precedence. A
subclass written for 0.1 that overrides a hook the framework no longer calls on the algorithm is
still called, with a warning (``rlf.algorithms.overrides.deprecated_override``); its ``super()``
call of the hook then warns no second time.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from rlf.algorithms.overrides import overrides
from rlf.utils.deprecation import warn_deprecated

__all__ = ["DEPRECATED_MEMBERS", "DeprecatedMember", "deprecated_member",
           "install_deprecated_members", "shim_training_loop"]


def shim_training_loop(algorithm):
    """The ``TrainingLoop`` behind the deprecated loop members (``set_unroller``,
    ``replay_buffer``, ...): the algorithm's ``training_loop`` (the last one built over it), or
    one built now."""
    from rlf.algorithms.training_loop import TrainingLoop
    loop = algorithm.training_loop
    return TrainingLoop(algorithm) if loop is None else loop


def _loop_member(name: str) -> Callable[[Any], Any]:
    return lambda alg: getattr(shim_training_loop(alg), name)


def _set_actor_index(alg):
    from rlf.unrollers.actor_params import ActorIdentity

    def set_actor_index(index: int, num_actors: int) -> None:
        alg.actor_identity = ActorIdentity(index, num_actors)
    return set_actor_index


def _actor_state_dict(alg):
    from rlf.unrollers.actor_params import actor_state_dict
    return lambda: actor_state_dict(alg)


def _load_initial_checkpoint(alg):
    from rlf.algorithms.algorithm_state import load_initial_checkpoint
    return lambda: load_initial_checkpoint(alg)


def _observation_normalizers(alg):
    from rlf.algorithms.training_loop import observation_normalizers
    return lambda: observation_normalizers(alg)


def _train_from_replay_buffer(alg):
    def train_from_replay_buffer(update_global_counter: bool = False) -> int:
        loop = shim_training_loop(alg)
        return loop._train_on_batches(loop.data_path.batches(update_global_counter))
    return train_from_replay_buffer


def _train_epochs(alg):
    def train_epochs(experience, batch_info, num_epochs: int, shuffle: bool,
                     mix_offline: bool = False, update_global_counter: bool = False) -> int:
        loop = shim_training_loop(alg)
        path = loop.data_path
        mixer = path.offline_mixer() if mix_offline else None
        return loop._train_on_batches(path.mini_batches.epochs(
            alg, experience, batch_info, num_epochs, shuffle, mixer, update_global_counter))
    return train_epochs


def _loop_shim(replacement: str) -> Tuple[str, Callable[[Any], Any]]:
    """The table entry of a member that moved to ``TrainingLoop.<replacement>``, which an
    algorithm reaches as ``self.training_loop.<replacement>``."""
    return f"algorithm.training_loop.{replacement}", _loop_member(replacement)


#: name -> (what replaces it, ``fn(algorithm) -> the member's value``).
DEPRECATED_MEMBERS: Dict[str, Tuple[str, Callable[[Any], Any]]] = {
    # the learner's
    "optimizers": ("algorithm.learner.optimizers", lambda a: a.learner.optimizers),
    "optimizer_names": ("algorithm.learner.names", lambda a: a.learner.names),
    "optimizer_steps": ("algorithm.learner.optimizer_steps",
                        lambda a: a.learner.optimizer_steps),
    "update_with_gradient": ("algorithm.learner.update_with_gradient",
                             lambda a: a.learner.update_with_gradient),
    "summarize_train": ("algorithm.learner.summarize_train",
                        lambda a: a.learner.summarize_train),
    # the constructor's arguments
    "config": ("the config your constructor receives (keep a reference of your own)",
               lambda a: a._rlf_config),
    "env": ("the env your constructor receives (keep a reference of your own)",
            lambda a: a._rlf_env),
    "reward_weights": ("the reward_weights your constructor receives (weighted_reward "
                       "applies them)", lambda a: a._reward_weights),
    "has_multidim_reward": ("algorithm.reward_spec.numel > 1",
                            lambda a: (lambda: a.reward_spec.numel > 1)),
    "load_initial_checkpoint": ("rlf.algorithms.algorithm_state.load_initial_checkpoint"
                                "(algorithm)", _load_initial_checkpoint),
    "trains_on_rollout_graph": ("the constructor argument rollout_graph_training",
                                lambda a: a._rlf_trains_on_rollout_graph()),
    "offline_experience_spec": ("algorithm.offline_layout().spec",
                                lambda a: (lambda: a.offline_layout().spec)),
    "offline_replay_aliases": ("algorithm.offline_layout().aliases",
                               lambda a: (lambda: a.offline_layout().aliases)),
    "rollout_info_spec_probe": ("algorithm.offline_layout().spec.rollout_info",
                                lambda a: a._rlf_rollout_info_spec_probe),
    # the actors'
    "actor_state_dict": ("rlf.unrollers.actor_params.actor_state_dict(algorithm)",
                         _actor_state_dict),
    "set_actor_index": ("algorithm.actor_identity = "
                        "rlf.unrollers.actor_params.ActorIdentity(index, num_actors)",
                        _set_actor_index),
    "actor_index": ("algorithm.actor_identity.index (None on the learner)",
                    lambda a: None if a.actor_identity is None else a.actor_identity.index),
    "num_actors": ("algorithm.actor_identity.num_actors (None on the learner)",
                   lambda a: None if a.actor_identity is None else a.actor_identity.num_actors),
    # the training loop's
    "observation_normalizers": ("rlf.algorithms.training_loop.observation_normalizers"
                                "(algorithm)", _observation_normalizers),
    "set_unroller": _loop_shim("set_unroller"),
    "unroller": _loop_shim("unroller"),
    "data_path": ("algorithm.training_loop.data_path.name",
                  lambda a: shim_training_loop(a).data_path.name),
    "check_training_settings": ("rlf.algorithms.TrainingLoop(algorithm) (it builds the data "
                                "path, which refuses the settings)",
                                lambda a: (lambda: shim_training_loop(a) and None)),
    "rollout_info_spec": _loop_shim("rollout_info_spec"),
    "get_metrics": ("algorithm.training_loop.metrics",
                    lambda a: (lambda: shim_training_loop(a).metrics)),
    "get_step_metrics": ("algorithm.training_loop.metrics[:2]",
                         lambda a: (lambda: shim_training_loop(a).metrics[:2])),
    "observe_for_metrics": _loop_shim("observe_for_metrics"),
    "summarize_metrics": _loop_shim("summarize_metrics"),
    "summarize_rollout": _loop_shim("summarize_rollout"),
    "replay_buffer": _loop_shim("replay_buffer"),
    "offline_replay_buffer": _loop_shim("offline_replay_buffer"),
    "replay_buffer_state_dict": _loop_shim("replay_buffer_state_dict"),
    "load_replay_buffer_state_dict": _loop_shim("load_replay_buffer_state_dict"),
    "load_offline_replay_buffer": _loop_shim("load_offline_data"),
    "update_observation_normalizers": _loop_shim("update_observation_normalizers"),
    "unroll": _loop_shim("unroll"),
    "finish_train": _loop_shim("close"),
    "train_from_unroll": ("algorithm.train_iter() (the data path's observe and batches, "
                          "rlf.algorithms.data_paths)",
                          lambda a: shim_training_loop(a)._train_on_unroll),
    "train_from_replay_buffer": ("algorithm.train_iter() (the data path's batches, "
                                 "rlf.algorithms.data_paths)", _train_from_replay_buffer),
    "train_epochs": ("algorithm.train_iter() (MiniBatches.epochs and Learner.update, "
                     "rlf.algorithms.data_paths)", _train_epochs),
}


def deprecated_member(algorithm, name: str, warn: bool = True) -> Any:
    """The value of deprecated member ``name`` of ``algorithm``, with a warning (once per
    name) naming its replacement.

    Args:
        algorithm: the algorithm.
        name: a key of ``DEPRECATED_MEMBERS``.
        warn: False where the caller was warned already (the ``super()`` call inside an
            override that ``deprecated_override`` warned about).

    Raises:
        AttributeError: for a name that is no deprecated member.
    """
    entry = DEPRECATED_MEMBERS.get(name)
    if entry is None:
        raise AttributeError(f"'{type(algorithm).__name__}' object has no attribute '{name}'")
    replacement, get = entry
    owner = "Algorithm" if name in _ALGORITHM_MEMBERS else "RLAlgorithm"
    if warn:  # stacklevel: the code that read the member (through DeprecatedMember.__get__)
        warn_deprecated(f"{owner}.{name}", replacement, stacklevel=4)
    return get(algorithm)


#: The 0.1 hooks the framework still calls through an override (``deprecated_override``):
#: what an override's ``super()`` call gets, their default (calling the framework's
#: dispatch there would call the override again).
_SUPER_DEFAULTS: Dict[str, Callable[[Any], Any]] = {
    "trains_on_rollout_graph": lambda a: a._rlf_rollout_graph_training,
    "summarize_rollout": lambda a: shim_training_loop(a)._default_summarize_rollout,
    "summarize_train": lambda a: a.learner._default_summarize_train,
}


class DeprecatedMember:
    """A member of rlf 0.1 as a class attribute of ``Algorithm`` (a non-data descriptor), so
    that ``self.<name>`` and ``super().<name>`` both reach it. A sub-module, parameter,
    buffer or instance attribute of the same name wins, as it would without it.

    Args:
        name: a key of ``DEPRECATED_MEMBERS``.
    """

    def __init__(self, name: str):
        self.name = name

    def __get__(self, algorithm, owner=None):
        if algorithm is None:
            return self
        for store in ("_parameters", "_buffers", "_modules"):
            values = vars(algorithm).get(store) or {}
            if self.name in values:
                return values[self.name]
        # Inside an override of the hook (its super() call): the override was warned about,
        # and a hook the framework calls through the override gives its default.
        overridden = overrides(type(algorithm), self.name)
        if overridden and self.name in _SUPER_DEFAULTS:
            return _SUPER_DEFAULTS[self.name](algorithm)
        return deprecated_member(algorithm, self.name, warn=not overridden)


def install_deprecated_members(cls: type) -> None:
    """Makes every ``DEPRECATED_MEMBERS`` entry a ``DeprecatedMember`` of ``cls`` (rlf's
    ``Algorithm``), past names ``cls`` or its bases define."""
    for name in DEPRECATED_MEMBERS:
        if not hasattr(cls, name):
            setattr(cls, name, DeprecatedMember(name))


_ALGORITHM_MEMBERS = {"optimizers", "optimizer_names", "optimizer_steps",
                      "update_with_gradient", "config", "load_initial_checkpoint"}
