"""RLAlgorithm: an ``Algorithm`` that acts in an environment (ALF's ``RLAlgorithm``).

It adds the environment's specs, the reward's weighting, the actor's identity and the hooks of
acting and replay to ``Algorithm``. A ``TrainingLoop`` trains it through the data path the
settings select (``rlf.algorithms.data_paths``). A research variant subclasses it and writes
``rollout_step``, ``calc_loss`` and (off-policy) ``train_step``; see ``examples/a2c.py``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.algorithms.algorithm import Algorithm, RunArgs
from rlf.algorithms.counters import without_legacy_update_counter
from rlf.algorithms.data_needs import DataNeeds
from rlf.algorithms.removed import check_observe_for_replay
from rlf.algorithms.reserved import set_framework_state
from rlf.algorithms.loops import loop_of, was_dropped
from rlf.algorithms.probe import probe_rollout_step
from rlf.algorithms.seams import DataPathSeam, LearnerSeam, LoopSeam
from rlf.data_structures import ActorIdentity, Experience, time_step_spec
from rlf.replay import ReplayBuffer
from rlf.replay.offline import OfflineLayout
from rlf.tensor_specs import TensorSpec, spec_from_tensors
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError

__all__ = ["RLAlgorithm", "adjust_replay_buffer_length", "check_unit_interval"]

logger = logging.getLogger(__name__)


def check_unit_interval(owner: str, **values: float) -> None:
    """Checks that each of ``values`` (name -> value: ``gamma``, ``td_lambda``, ...) is in
    ``[0, 1]``.

    Raises:
        ValueError: naming ``owner`` (the algorithm) and the first value outside.
    """
    for key, value in values.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{owner}: {key} must be in [0, 1], got {value}")


def adjust_replay_buffer_length(config, num_earliest_frames_ignored: int = 0) -> int:
    """Deprecated name of ``rlf.algorithms.data_paths.replay_buffer_length`` (removed in
    0.5): warns once, then returns what it returns."""
    from rlf.algorithms.data_paths import replay_buffer_length
    warn_deprecated("adjust_replay_buffer_length",
                    "rlf.algorithms.data_paths.replay_buffer_length")
    return replay_buffer_length(config, num_earliest_frames_ignored)


class RLAlgorithm(Algorithm):
    """Base class of reinforcement-learning algorithms: a policy, its hooks and its specs.

    A ``TrainingLoop`` trains it: it unrolls, gives each unroll to the data path the settings
    select (``rlf.algorithms.data_paths.make_data_path``, whose module docstring tabulates
    them) and has its ``Learner`` update on each of the path's batches.

    A subclass writes the policy (``rollout_step``, ``train_step`` on every path but
    ``"rollout_graph"``, ``calc_loss``; ``predict_step`` is ``rollout_step`` without its info
    by default) and may override the hooks: ``preprocess_experience`` (once on the whole
    batch-major ``[B, T]`` experience before it is split: GAE, returns),
    ``experience_sources``, ``after_update``, ``after_train_iter``,
    ``train_state_from_rollout_state``, ``actor_modules`` and ``offline_layout``. Several
    optimizers: ``add_optimizer``. It reads the counters (``num_updates``,
    ``get_env_steps()``), which reach actor copies with the parameters, and knows which actor
    a copy is (``actor_identity``; None on the learner).

    Args:
        observation_spec: nest of ``TensorSpec`` of one observation.
        action_spec: nest of ``BoundedTensorSpec`` of one action.
        train_state_spec: and ``Algorithm``'s other arguments: see ``Algorithm``.
        reward_spec: ``TensorSpec(())`` or ``TensorSpec((k,))`` for vector rewards.
        reward_weights: ``k`` weights for vector rewards (``weighted_reward``); ones if None.
        reward_scale: a factor on the training reward (ALF's ``RewardScaling``); the
            metrics keep the environment's.
        env: the batched training environment; only the root algorithm gets one.
        config: the ``TrainerConfig``; only the root algorithm gets one.
        metric_discount: ``gamma`` of the discounted-return metrics.
        replay_buffer_ctor: builds the replay buffer (``ReplayBuffer``'s arguments).
        rollout_graph_training: an on-policy algorithm trains on the rollout's own graph
            where the settings allow one update per unroll (``"rollout_graph"``); False:
            always in epochs through ``train_step`` (PPO).
        data_needs: what ``train_step`` and ``calc_loss`` need of the data path
            (``DataNeeds``), checked by ``make_data_path`` before anything runs.

    Raises:
        ValueError: for a reward spec of rank > 1, ``reward_weights`` that do not fit it, a
            ``reward_scale`` <= 0, or an ``env`` without ``config``.
        UserError: (a ``ValueError``) for a 0.1-style ``observe_for_replay``, and as
            ``Algorithm``.
    """

    _rlf_base_class = True  # defines reserved names (``reserved.py``)
    # The base class's state (``reserved.set_framework_state``).
    _rlf_observation_spec: Any
    _rlf_action_spec: Any
    _rlf_reward_spec: TensorSpec
    _reward_weights: Optional[torch.Tensor]
    _rlf_reward_scale: float
    _rlf_env: Any
    _rlf_replay_buffer_ctor: Any
    _rlf_metric_discount: float
    _rlf_data_needs: DataNeeds
    _rlf_actor_module_names: Optional[List[str]]
    _rlf_actor_identity: Optional[ActorIdentity]
    _rlf_own_loop: Any

    def __init__(self,
                 observation_spec: Any,
                 action_spec: Any,
                 train_state_spec: Any = (),
                 reward_spec: TensorSpec = TensorSpec(()),
                 predict_state_spec: Any = None,
                 rollout_state_spec: Any = None,
                 is_on_policy: Optional[bool] = None,
                 reward_weights: Optional[Sequence[float]] = None,
                 reward_scale: float = 1.0,
                 env=None,
                 config=None,
                 optimizer=None,
                 checkpoint: Optional[str] = None,
                 debug_summaries: bool = False,
                 name: str = "RLAlgorithm",
                 metric_discount: float = 0.99,
                 replay_buffer_ctor=None,
                 rollout_graph_training: bool = True,
                 data_needs: DataNeeds = DataNeeds(),
                 **kwargs):
        check_observe_for_replay(type(self))
        super().__init__(train_state_spec=train_state_spec,
                         rollout_state_spec=rollout_state_spec,
                         predict_state_spec=predict_state_spec, is_on_policy=is_on_policy,
                         optimizer=optimizer, config=config, checkpoint=checkpoint,
                         debug_summaries=debug_summaries, name=name, **kwargs)
        if reward_spec.ndim > 1:
            raise ValueError(f"{name}: reward_spec must be rank 0 or 1, got {reward_spec}")
        set_framework_state(self, _rlf_observation_spec=observation_spec,
                            _rlf_action_spec=action_spec, _rlf_reward_spec=reward_spec)
        if reward_spec.numel > 1:
            weights = [1.0] * reward_spec.numel if reward_weights is None else reward_weights
            if len(weights) != reward_spec.numel:
                raise ValueError(f"{name}: {len(weights)} reward_weights for a reward of "
                                 f"{reward_spec.numel} dimensions")
            nn.Module.register_buffer(self, "_reward_weights",
                                      torch.tensor(weights, dtype=torch.float32))
        elif reward_weights is not None:
            raise ValueError(f"{name}: reward_weights need a vector reward_spec, got "
                             f"{reward_spec}")
        else:
            set_framework_state(self, _reward_weights=None)
        if not reward_scale > 0:
            raise ValueError(f"{name}: reward_scale must be > 0, got {reward_scale}")
        set_framework_state(
            self, _rlf_reward_scale=float(reward_scale), _rlf_env=env,
            _rlf_replay_buffer_ctor=replay_buffer_ctor or ReplayBuffer,
            _rlf_metric_discount=metric_discount,
            _rlf_data_needs=data_needs._replace(rollout_graph_training=bool(
                rollout_graph_training and data_needs.rollout_graph_training)),
            _rlf_actor_module_names=None,  # found by a probe step
            _rlf_actor_identity=None,  # set on an actor's copy
            _rlf_own_loop=None)  # the TrainingLoop train_iter built, kept alive here
        # ALF's protected names, for a subclass to read (or replace: rlf never reads them).
        self._observation_spec, self._action_spec = observation_spec, action_spec
        self._reward_spec, self._env = reward_spec, env
        if env is not None and config is None:
            raise ValueError(f"{name}: an algorithm given an env needs config=TrainerConfig")

    # ------------------------------------------------------------------ properties
    @property
    def observation_spec(self) -> Any:
        """Nest of ``TensorSpec`` of one observation."""
        return self._rlf_observation_spec

    @property
    def action_spec(self) -> Any:
        """Nest of ``BoundedTensorSpec`` of one action."""
        return self._rlf_action_spec

    @property
    def reward_spec(self) -> TensorSpec:
        """``TensorSpec(())`` or ``TensorSpec((k,))``."""
        return self._rlf_reward_spec

    @property
    def actor_identity(self) -> Optional[ActorIdentity]:
        """Which actor this copy is (``ActorIdentity(index, num_actors)``), for per-actor
        behaviour (Ape-X's epsilons); None on the learner.

        Raises:
            ValueError: when set to an index outside ``[0, num_actors)``.
        """
        return self._rlf_actor_identity

    @actor_identity.setter
    def actor_identity(self, identity: Optional[ActorIdentity]) -> None:
        if identity is not None:
            index, num_actors = identity
            if not 0 <= index < num_actors:
                raise ValueError(f"{self._rlf_name}: actor index {index} is not in "
                                 f"[0, {num_actors})")
            identity = ActorIdentity(int(index), int(num_actors))
        set_framework_state(self, _rlf_actor_identity=identity)

    def _rlf_run_args(self) -> RunArgs:
        """``Algorithm``'s run arguments with the training environment, the metrics' discount
        and the replay buffer's constructor."""
        return RunArgs(self._rlf_config, self._rlf_device, self._rlf_checkpoint,
                       self._rlf_env, self._rlf_metric_discount, self._rlf_replay_buffer_ctor,
                       self._rlf_loss_average, self._rlf_optimizers)

    @property
    def data_needs(self) -> DataNeeds:
        """What ``train_step`` and ``calc_loss`` need of the data path (the constructor's
        ``data_needs`` and ``rollout_graph_training``; read-only), which ``make_data_path``
        checks against the settings."""
        return self._rlf_data_needs

    def train_iter(self) -> int:
        """One training iteration (ALF's ``RLAlgorithm.train_iter``): unroll, train through
        the data path the settings select, then ``after_train_iter``. An algorithm built with
        ``env=`` and ``config=`` trains on its own environment::

            alg = PPOAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                               config=TrainerConfig(...), ...)
            for _ in range(100):
                alg.train_iter()

        The first call builds ``build_training(self, SyncUnroller(env, self))`` (without
        ``env``, a purely offline config trains on its data alone), which the algorithm keeps
        (``rlf.algorithms.loop_of(alg)`` finds it); an algorithm that a loop built elsewhere
        trains (a ``Trainer``'s, ``build_training``'s, while what built it holds it) trains
        through that loop.

        Returns:
            The steps trained on (with repetitions).

        Raises:
            UserError: (a ``ValueError``) without ``config``, for settings the data path
                refuses, offline data it cannot read, or when a loop built over it elsewhere
                was let go (it would silently start another).
            RuntimeError: for a config that unrolls, without ``env`` or an unroller.
            ActorError: if an actor of the loop's unroller failed.
        """
        loop = loop_of(self) or self._rlf_own_loop
        if loop is None:
            if was_dropped(self):
                raise UserError(f"{self._rlf_name}: the TrainingLoop built over it is no "
                                f"longer held, so train_iter would start another; keep it "
                                f"(loop = build_training(...)) and call loop.train_iter()")
            if self._rlf_config is None:
                raise UserError(f"{self._rlf_name}: train_iter needs the algorithm built with "
                                f"config=TrainerConfig(...) (and env= to act), or a loop "
                                f"built over it (rlf.algorithms.build_training)")
            # ALF's way in alone builds from here: the algorithm's module imports neither.
            from rlf.algorithms.builder import build_training
            from rlf.unrollers import SyncUnroller
            env = self._rlf_env
            loop = build_training(self, None if env is None else SyncUnroller(env, self),
                                  learner=self._rlf_own_learner)  # (one read before: kept)
            set_framework_state(self, _rlf_own_loop=loop)
        elif loop.unroller is None and self._rlf_env is not None:
            from rlf.unrollers import SyncUnroller
            loop.set_unroller(SyncUnroller(self._rlf_env, self))
        return loop.train_iter()

    def get_env_steps(self) -> int:
        """Environment steps so far; on an actor, as of the parameters it acts with."""
        return self._rlf_optimizers.counters.env_steps

    def weighted_reward(self, reward: torch.Tensor) -> torch.Tensor:
        """The scalar training reward: ``reward`` ``[..., k]`` weighted by the
        ``reward_weights`` and summed, or ``reward`` itself if it is a scalar reward
        ``[...]``; times ``reward_scale``."""
        if self._reward_weights is not None:
            reward = (reward * self._reward_weights.to(reward.device)).sum(-1)
        return reward if self._rlf_reward_scale == 1.0 else reward * self._rlf_reward_scale

    # ------------------------------------------------------------------ hooks
    def actor_modules(self) -> List[str]:
        """The names of the sub-modules an actor needs: by default those whose ``forward`` runs
        in a probe ``rollout_step``. Override it for a module used without being called."""
        names = self._rlf_actor_module_names
        if names is None:
            called = []
            hooks = [m.register_forward_pre_hook(lambda mod, args, n=n: called.append(n))
                     for n, m in self.named_modules() if n]
            try:
                probe_rollout_step(self)
            finally:
                for h in hooks:
                    h.remove()
            names = sorted(set(called))
            set_framework_state(self, _rlf_actor_module_names=names)
        return list(names)

    def offline_layout(self) -> OfflineLayout:
        """How offline replay files are read (when ``build_training`` loads them): the spec
        of one step and the aliases of its keys.

        By default the layout of online steps: the time step (no ``env_info``), the action
        and a probe ``rollout_step``'s ``rollout_info``, no state; its action also found
        under ALF's ``rollout_info|rl|action`` or the top-level ``action``.

        Returns:
            ``OfflineLayout(spec, aliases)``.
        """
        ts = time_step_spec(self._rlf_observation_spec, self._rlf_action_spec,
                            self._rlf_reward_spec)
        action = self._rlf_action_spec

        def _bounded(path, spec):  # the recorded action keeps its bounds (checked, rescaled)
            fits = (isinstance(action, TensorSpec) and path.split(".")[-1] == "action"
                    and spec.shape == action.shape and spec.dtype == action.dtype)
            return action if fits else spec

        info = nest.map_structure_with_path(
            _bounded, spec_from_tensors(probe_rollout_step(self).info))
        spec = Experience(time_step=ts._replace(env_info={}), action=action,
                          rollout_info=info, state=())
        return OfflineLayout(spec=spec,
                             aliases={"rollout_info|action": ["rollout_info|rl|action",
                                                              "action"]})

    # ------------------------------------------------------------------ checkpoints
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign=False):
        """``Algorithm.load_state_dict`` without a run checkpoint's ``_metrics.*`` and rlf
        0.1's ``_num_updates``.

        Raises:
            ValueError: see ``Algorithm.load_state_dict``.
        """
        if any(k.startswith("_metrics.") for k in state_dict):
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith("_metrics.")}
        state_dict = without_legacy_update_counter(
            state_dict, nn.Module.state_dict(self).keys())
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


if TYPE_CHECKING:
    def _conforms(algorithm: RLAlgorithm) -> Tuple[LearnerSeam, DataPathSeam, LoopSeam]:
        """mypy checks here that every ``RLAlgorithm`` is each seam (``seams.py``)."""
        return algorithm, algorithm, algorithm
