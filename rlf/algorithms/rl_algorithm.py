"""RLAlgorithm: an ``Algorithm`` that acts in an environment (ALF's ``RLAlgorithm``).

It adds the environment, the unroller, the metrics, the replay buffer and ``train_iter``:

- on-policy (``is_on_policy=True``) with one update per unroll (``trains_on_rollout_graph``:
  ``num_updates_per_train_iter = 1``, no mini-batch settings): ``unroll(unroll_length)``
  with gradients enabled, then one update on ``calc_loss`` of the rollout's own ``[T, B]``
  infos (A2C);
- on-policy with epochs (PPO): ``unroll`` without gradients, ``preprocess_experience`` once
  on the whole unroll (preceded by the previous unroll's last step), then
  ``num_updates_per_train_iter`` epochs over shuffled mini-batches of ``mini_batch_size``
  sequences of ``mini_batch_length`` steps (1: single transitions), each recomputed by
  ``train_step``;
- off-policy: ``unroll`` into the replay buffer, then sampled batches, or epochs over the
  whole buffer, again with ``preprocess_experience`` on the whole batch before it is split.

Each is a data path object (``rlf.algorithms.data_paths``), built from the settings by
``make_data_path``: ``train_iter`` unrolls, gives the unroll to the path (``observe``) and
trains the ``Learner`` on each of the path's ``batches``.

``calc_loss`` returns a ``[T, B]`` per-step loss, a ``[T-k, B]`` loss over the sequence's
first ``T - k`` steps (``k = 1``: transitions), a ``[B]`` or a scalar one, each masked by
``valid_step_mask`` (LAST steps, steps before an episode cut, the final step), computed before
the split, or by its own ``LossInfo.mask``. Several optimizers: ``add_optimizer``, with a dict
of loss terms keyed by optimizer name.

A research variant subclasses it and writes ``rollout_step``, ``calc_loss`` and (off-policy)
``train_step``; see ``examples/a2c.py``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

from rlf import nest
from rlf.algorithms.algorithm import Algorithm
from rlf.algorithms.counters import COUNTERS_KEY
from rlf.algorithms.data_paths import (DataPath, RolloutGraph, data_path_name, make_data_path,
                                       offline_data_settings, replay_buffer_length)
from rlf.algorithms.data_paths import trains_on_rollout_graph as _rollout_graph_settings
from rlf.data_structures import AlgStep, Experience, StepType, time_step_spec
from rlf.metrics import StepMetric, make_default_metrics
from rlf.networks.normalizers import ObservationNormalizer
from rlf.replay import ReplayBuffer
from rlf.replay.offline import make_offline_replay_buffer
from rlf.tensor_specs import TensorSpec, spec_from_tensors
from rlf.unrollers import ActorError, Unroller
from rlf.utils import summary
from rlf.utils.common import detach
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError, one_line

__all__ = ["RLAlgorithm", "adjust_replay_buffer_length", "check_unit_interval"]

logger = logging.getLogger(__name__)


def check_unit_interval(owner: str, **values: float) -> None:
    """Checks that each of ``values`` (a discount ``gamma``, a ``td_lambda``, ...) is in
    ``[0, 1]``.

    Args:
        owner: the algorithm's name, for the message.
        values: parameter name -> value.

    Raises:
        ValueError: naming ``owner`` and the first parameter outside ``[0, 1]``.
    """
    for key, value in values.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{owner}: {key} must be in [0, 1], got {value}")


#: ``rlf.algorithms.data_paths.replay_buffer_length`` under its earlier name.
adjust_replay_buffer_length = replay_buffer_length


class RLAlgorithm(Algorithm):
    """Base class of reinforcement-learning algorithms.

    The data path of training follows from the settings (``data_path``, the name of the
    object ``rlf.algorithms.data_paths.make_data_path`` builds); settings that the chosen
    path would ignore are refused with one line (``check_training_settings``):

    | ``is_on_policy`` | ``TrainerConfig`` settings | ``data_path``: what trains |
    |---|---|---|
    | True | ``num_updates_per_train_iter = 1``, no ``mini_batch_size``/``_length`` | ``"rollout_graph"``: one update on ``calc_loss`` of the rollout's own ``[T, B]`` infos, with their graph (A2C) |
    | True | otherwise | ``"unroll_epochs"``: the unroll (after the previous one's last step), without graph, in epochs of shuffled mini-batches through ``train_step`` (PPO) |
    | False | ``whole_replay_buffer_training`` | ``"replay_epochs"``: epochs over all the buffer holds (IMPALA's conf, with ``clear_replay_buffer``) |
    | False | otherwise | ``"replay_samples"``: sampled mini-batches of ``mini_batch_size`` sequences of ``mini_batch_length`` steps (SAC, TD3, DQN) |
    | False | ``unroll_length = 0``, ``offline_buffer_dir`` | ``"offline"``: sampled mini-batches of the offline data only |

    ``unroll_with_grad`` (off-policy only; on-policy paths decide it themselves) keeps
    ``rollout_step``'s graph for ``after_train_iter``. ``use_rollout_state``,
    ``burn_in_steps`` and ``temporally_independent_train_step`` choose how ``train_step`` runs
    over a sequence (every path but ``"rollout_graph"``, which calls no ``train_step`` and
    refuses them).

    Training (the module docstring has the details):

    - ``preprocess_experience(root_inputs, rollout_info, batch_info)`` is called once on the
      whole batch-major ``[B, T]`` experience before it is split (compute GAE or returns
      there, ALF's semantics).
    - ``calc_loss`` may return a ``[T-k, B]`` loss (``k = 1``: transitions), a ``[B]`` or a
      scalar one instead of a ``[T, B]`` per-step one; the loop masks it with
      ``valid_step_mask``'s first ``T - k`` rows, or with its own ``LossInfo.mask``.
    - ``add_optimizer(optimizer, modules, name=..., every=..., lr_scheduler=...)`` gives
      sub-modules optimizers of their own (SAC's actor, critics and temperature; TD3's
      delayed actor), each trained by its named term of a dict loss.
    - Hooks: ``after_update(root_inputs, info)`` after each update and
      ``after_train_iter(root_inputs, rollout_info)`` after each iteration both get a
      ``[T, B]`` ``TimeStep`` and ``[T, B]`` infos.
    - Actors get ``actor_state_dict()`` (the modules ``rollout_step`` calls) and know their
      ``actor_index`` (None on the learner).
    - The episode metrics write nothing before the first episode ends.

    Args:
        observation_spec: nest of ``TensorSpec`` of one observation.
        action_spec: nest of ``BoundedTensorSpec`` of one action.
        train_state_spec: and the other arguments ``Algorithm`` takes (``rollout_state_spec``,
            ``predict_state_spec``, ``is_on_policy``, ``optimizer``, ``checkpoint``,
            ``debug_summaries``, ``name``, ``gradient_clipping``, ``clip_by_global_norm``,
            ``lr_scheduler``): see ``Algorithm``.
        reward_spec: ``TensorSpec(())`` or ``TensorSpec((k,))`` for vector rewards.
        reward_weights: ``k`` weights for vector rewards (``weighted_reward``); ones if None.
        reward_scale: a constant factor on the training reward (``weighted_reward``; ALF's
            ``RewardScaling``), to bring value targets near unit scale; the metrics keep the
            environment's reward.
        env: the batched training environment; only the root algorithm gets one.
        config: the ``TrainerConfig``; only the root algorithm gets one.
        metric_discount: ``gamma`` of the discounted-return metrics.
        replay_buffer_ctor: builds the replay buffer, called with ``data_spec``,
            ``num_environments``, ``max_length``, ``prioritized_sampling``, ``alpha``,
            ``beta``, ``name`` (gin: ``ReplayBuffer.stacked_frames = {...}``).

    Raises:
        ValueError: for a reward spec of rank > 1, ``reward_weights`` that do not fit it, a
            ``reward_scale`` that is not positive, or an on-policy algorithm with a
            fractional or zero ``unroll_length``, or with ``unroll_length = 1`` where it
            trains on the rollout's graph.
    """

    _rlf_base_class = True  # defines reserved names (``reserved.py``)

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
                 **kwargs):
        super().__init__(train_state_spec=train_state_spec,
                         rollout_state_spec=rollout_state_spec,
                         predict_state_spec=predict_state_spec, is_on_policy=is_on_policy,
                         optimizer=optimizer, config=config, checkpoint=checkpoint,
                         debug_summaries=debug_summaries, name=name, **kwargs)
        if reward_spec.ndim > 1:
            raise ValueError(f"{name}: reward_spec must be rank 0 or 1, got {reward_spec}")
        self._observation_spec = observation_spec
        self._action_spec = action_spec
        self._reward_spec = reward_spec
        if reward_spec.numel > 1:
            weights = [1.0] * reward_spec.numel if reward_weights is None else reward_weights
            if len(weights) != reward_spec.numel:
                raise ValueError(f"{name}: {len(weights)} reward_weights for a reward of "
                                 f"{reward_spec.numel} dimensions")
            self.register_buffer("_reward_weights", torch.tensor(weights, dtype=torch.float32))
        elif reward_weights is not None:
            raise ValueError(f"{name}: reward_weights need a vector reward_spec, got "
                             f"{reward_spec}")
        else:
            self._reward_weights = None
        if not reward_scale > 0:
            raise ValueError(f"{name}: reward_scale must be > 0, got {reward_scale}")
        self._reward_scale = float(reward_scale)
        self._env = env
        self._rollout_info_spec = None
        self._remaining_unroll_length_fraction = 0.0
        self._replay_buffer_ctor = replay_buffer_ctor or ReplayBuffer
        self._actor_module_names: Optional[List[str]] = None  # found by a probe step
        self._actor_index = None  # (index, num_actors) on an actor's copy
        self._metrics = None
        self._metric_discount = metric_discount
        self._unroller: Optional[Unroller] = None
        self._num_envs = 0
        self._path: Optional[DataPath] = None  # built from the config when first needed
        if env is not None:
            if config is None:
                raise ValueError(f"{name}: an algorithm given an env needs config=TrainerConfig")
            if self._is_on_policy and (config.unroll_length < 1
                                       or config.unroll_length != int(config.unroll_length)):
                raise ValueError(f"{name} is on-policy: TrainerConfig.unroll_length must be a "
                                 f"positive integer, got {config.unroll_length}")
            if config.unroll_length == 1 and self.trains_on_rollout_graph:
                # Each unroll's graph is its own: no step would ever have a successor.
                raise ValueError(f"{name} trains on each unroll's own graph, where a step's "
                                 f"transition needs the next step in the same unroll: "
                                 f"TrainerConfig.unroll_length must be >= 2, got 1 (or train "
                                 f"in epochs, carrying the last step over: set "
                                 f"TrainerConfig.mini_batch_size)")

    # ------------------------------------------------------------------ properties
    @property
    def observation_spec(self) -> Any:
        """Nest of ``TensorSpec`` of one observation."""
        return self._observation_spec

    @property
    def action_spec(self) -> Any:
        """Nest of ``BoundedTensorSpec`` of one action."""
        return self._action_spec

    @property
    def reward_spec(self) -> TensorSpec:
        """``TensorSpec(())`` or ``TensorSpec((k,))``."""
        return self._reward_spec

    @property
    def reward_weights(self) -> Optional[torch.Tensor]:
        """``[k]`` weights of a vector reward, or None for a scalar reward."""
        return self._reward_weights

    @property
    def env(self):
        """The training environment (None for sub-algorithms)."""
        return self._env

    @property
    def unroller(self) -> Optional[Unroller]:
        """The unroller collecting experience (``set_unroller``), or None."""
        return self._unroller

    def set_unroller(self, unroller: Unroller) -> None:
        """Gives the algorithm the ``Unroller`` it acts through (the ``Trainer`` builds it:
        ``SyncUnroller(env, algorithm)``, or an actor unroller over ``num_actors * B``
        environments) and sizes the episode metrics for its ``batch_size``. Call it once,
        before the first ``train_iter`` and before restoring a checkpoint (the metrics are
        part of the state).

        Raises:
            ValueError: without ``config``, or for a second unroller of another batch size.
            UserError: (a ``ValueError``) for an off-policy algorithm whose
                ``initial_collect_steps`` exceed what the replay buffer holds, or whose
                sampled sequences are longer than a replay ring (training would never
                start), or whose replay buffer refuses its settings (``_probe_replay_buffer``).
        """
        if self._config is None:
            raise ValueError(f"{self._name}: set_unroller needs config=TrainerConfig")
        if not self.on_policy:
            path = self._training_path()
            path.check_fits(unroller.batch_size, path.length - self._probe_replay_buffer())
        if self._metrics is not None and unroller.batch_size != self._num_envs:
            raise ValueError(f"{self._name}: the metrics were sized for {self._num_envs} "
                             f"environments, the new unroller has {unroller.batch_size}")
        self._unroller = unroller
        if self._metrics is None:
            self._num_envs = unroller.batch_size
            env = self._env
            self._metrics = make_default_metrics(
                batch_size=self._num_envs, reward_shape=tuple(self._reward_spec.shape),
                env_info_spec=env.env_info_spec() if env is not None else {},
                buffer_size=max(self._config.metric_min_buffer_size, self._num_envs),
                discount=self._metric_discount)

    def _probe_replay_buffer(self) -> int:
        """Builds a one-step replay buffer with ``replay_buffer_ctor`` over the experience's
        spec as far as it is known before the first step (all of it but ``rollout_info``),
        so that a setting the buffer refuses (a ``ReplayBuffer.stacked_frames`` path or
        shape) stops the run before anything is written. Returns the probe's
        ``num_earliest_frames_ignored`` (frame stacking's). A ``stacked_frames`` path inside
        ``rollout_info`` is left to the buffer built at the first step.

        Raises:
            UserError: (a ``ValueError``) for a setting the buffer refuses.
        """
        env = self._env
        ts = (env.time_step_spec() if env is not None else
              time_step_spec(self._observation_spec, self._action_spec, self._reward_spec))
        spec = Experience(time_step=ts, action=self._action_spec, rollout_info=(),
                          state=self.rollout_state_spec)
        try:
            probe = self._make_replay_buffer(spec, num_environments=1, max_length=1)
        except UserError as e:
            if "'rollout_info." in str(e):  # a path the probe's spec cannot hold
                return 0
            raise
        return probe.num_earliest_frames_ignored

    def _make_replay_buffer(self, data_spec, num_environments: int,
                            max_length: int) -> ReplayBuffer:
        """``replay_buffer_ctor`` with the config's prioritised-replay settings.

        Raises:
            UserError: (a ``ValueError``) for a configured setting the buffer refuses (e.g.
                a ``ReplayBuffer.stacked_frames`` path that is not a field of the spec).
        """
        try:
            return self._replay_buffer_ctor(
                data_spec=data_spec, num_environments=num_environments, max_length=max_length,
                name=f"{self._name}_replay_buffer", **self._training_path().priority)
        except ValueError as e:
            raise UserError(one_line(e)) from e

    @property
    def trains_on_rollout_graph(self) -> bool:
        """Whether on-policy training uses the rollout's own forward pass (one update per
        unroll, no ``train_step``): on-policy with ``num_updates_per_train_iter = 1`` and
        neither ``mini_batch_size`` nor ``mini_batch_length`` set. Otherwise an on-policy
        algorithm unrolls without gradients and trains in epochs. Override it to return
        False for an algorithm that needs ``train_step`` whatever the settings (PPO)."""
        return bool(self.on_policy) and _rollout_graph_settings(self._config)

    @property
    def data_path(self) -> str:
        """How this algorithm trains with its ``TrainerConfig``: the name of its data path,
        ``"rollout_graph"``, ``"unroll_epochs"``, ``"replay_epochs"``, ``"replay_samples"`` or
        ``"offline"`` (``rlf.algorithms.data_paths``)."""
        if self._path is not None:
            return self._path.name
        return data_path_name(self, self._config)

    def _training_path(self) -> DataPath:
        """The data path (``make_data_path``), built at the first call, with its learner.

        Raises:
            UserError: for settings the path refuses (``make_data_path``).
        """
        if self._path is None:
            if self._config is None:
                raise ValueError(f"{self._name}: training needs config=TrainerConfig")
            path = make_data_path(self, self._config)
            self._learner.sequences = path.sequences
            self._learner.prioritized = getattr(path, "prioritized", False)
            self._path = path
        return self._path

    def check_training_settings(self) -> None:
        """Refuses ``TrainerConfig`` settings that this algorithm's data path would ignore or
        that contradict each other, by building it (``make_data_path``; the trainer calls it
        before anything is written).

        Raises:
            UserError: one line naming the settings, the data path and the fix.
        """
        if self._config is not None:
            self._training_path()

    def actor_modules(self) -> List[str]:
        """The names (``named_modules``) of the sub-modules an actor needs to act: by default
        those whose ``forward`` runs in ``rollout_step`` (found once, by a probe step on a
        zero ``FIRST`` step), not the critics, target networks or metrics. Override it for a
        ``rollout_step`` that uses a module without calling it (its parameters directly)."""
        names = self._actor_module_names
        if names is None:
            called = []
            hooks = [m.register_forward_pre_hook(lambda mod, args, n=n: called.append(n))
                     for n, m in self.named_modules() if n and not n.startswith("_metrics")]
            try:
                self._probe_rollout_step()
            finally:
                for h in hooks:
                    h.remove()
            names = self._actor_module_names = sorted(set(called))
        return list(names)

    def actor_state_dict(self) -> Dict[str, torch.Tensor]:
        """The tensors an actor's copy of this algorithm needs to act as it does: the
        parameters and buffers of ``actor_modules()`` and the algorithm's own (those of no
        sub-module: counters, bounds, a temperature), by ``nn.Module`` name. Actor unrollers
        copy these from the learner to the actors at every parameter update.

        The counters travel with them (``COUNTERS_KEY``: ``num_updates``, the optimizers' step
        counts, ``get_env_steps()`` and ``train_iter_num``, one CPU tensor), so that a
        ``rollout_step`` on an actor reads the learner's values as of the parameters it acts
        with."""
        prefixes = tuple(f"{n}." for n in self.actor_modules())
        own = {n for n, _ in self.named_parameters(recurse=False)} | {
            n for n, _ in self.named_buffers(recurse=False)}
        params = {k: v for k, v in nn.Module.state_dict(self, keep_vars=True).items()
                  if isinstance(v, torch.Tensor) and (k.startswith(prefixes) or k in own)}
        try:
            self.optimizers  # noqa: B018 (sizes the optimizers' step counts)
        except UserError:
            pass  # parameters without an optimizer: no step counts (the learner's alike)
        self._counters.env_steps = self.get_env_steps()
        params[COUNTERS_KEY] = self._counters.tensor
        return params

    def set_actor_index(self, index: int, num_actors: int) -> None:
        """Marks this copy as actor ``index`` of ``num_actors`` (``build_actor`` calls it in
        each actor process and Ray actor), for per-actor behaviour such as Ape-X's
        exploration (``DQNAlgorithm.actor_epsilons``).

        Raises:
            ValueError: unless ``0 <= index < num_actors``.
        """
        if not 0 <= index < num_actors:
            raise ValueError(f"{self._name}: actor index {index} is not in [0, {num_actors})")
        self._actor_index = (int(index), int(num_actors))

    @property
    def actor_index(self) -> Optional[int]:
        """This copy's actor index, or None for the learner (and a synchronous unroll)."""
        pair = self._actor_index
        return None if pair is None else pair[0]

    @property
    def num_actors(self) -> Optional[int]:
        """The number of actors this copy is one of, or None for the learner."""
        pair = self._actor_index
        return None if pair is None else pair[1]

    @property
    def rollout_info_spec(self) -> Any:
        """Spec of ``rollout_step``'s info, known after the first unroll.

        Raises:
            RuntimeError: before the first unroll.
        """
        if self._rollout_info_spec is None:
            raise RuntimeError(f"{self._name}: rollout_info_spec is known only after the "
                               f"first rollout_step")
        return self._rollout_info_spec

    def has_multidim_reward(self) -> bool:
        """Whether the reward is a vector."""
        return self._reward_spec.numel > 1

    def weighted_reward(self, reward: torch.Tensor) -> torch.Tensor:
        """The scalar training reward: ``reward`` ``[..., k]`` weighted by ``reward_weights``
        and summed, or ``reward`` itself if it is a scalar reward ``[...]``; times
        ``reward_scale``."""
        if self._reward_weights is not None:
            reward = (reward * self._reward_weights.to(reward.device)).sum(-1)
        return reward if self._reward_scale == 1.0 else reward * self._reward_scale

    # ------------------------------------------------------------------ metrics
    def get_metrics(self) -> List[StepMetric]:
        """The eight metrics, in ALF's order (empty without an environment)."""
        return [] if self._metrics is None else list(self._metrics)

    def get_step_metrics(self) -> List[StepMetric]:
        """``[NumberOfEpisodes, EnvironmentSteps]``."""
        return self.get_metrics()[:2]

    def get_env_steps(self) -> int:
        """Environment steps taken so far (``EnvironmentSteps``); on an actor, the learner's
        count as of the parameters it acts with."""
        if self._metrics is not None:
            return int(self._metrics[1].result())
        return self._counters.env_steps

    def observe_for_metrics(self, time_step) -> None:
        """Feeds a ``[B]`` time step or a ``[T, B]`` unroll of them (CPU) to every metric."""
        for m in self._metrics:
            m(time_step)

    def summarize_metrics(self) -> None:
        """Writes every metric against the global counter and against EnvironmentSteps."""
        if not summary.should_record_summaries():
            return
        env_steps = self.get_step_metrics()[1:]
        for m in self.get_metrics():
            m.gen_summaries(step_metrics=env_steps)

    # ------------------------------------------------------------------ replay
    def observe_for_replay(self, exp: Experience) -> None:
        """Adds one ``[B]`` step of experience to the replay buffer (created on first use from
        the experience's structure, ``adjust_replay_buffer_length`` and the config).

        Raises:
            UserError: (a ``ValueError``) if the buffer refuses its configured settings (e.g.
                a ``ReplayBuffer.stacked_frames`` path that is not a field of the experience)
                or its sequences do not fit in it.
        """
        path = self._training_path()
        if path.buffer is None:
            path.set_buffer(self._make_replay_buffer(spec_from_tensors(exp), self._num_envs,
                                                     path.length))
        path.buffer.add_batch(exp, exp.time_step.env_id)

    def replay_buffer_state_dict(self) -> Optional[dict]:
        """The replay buffer's state under ALF's keys (``_replay_buffer.time_step|reward``,
        ...), or None if there is no buffer yet."""
        if self.replay_buffer is None:
            return None
        return {f"_replay_buffer.{k}": v for k, v in self.replay_buffer.state_dict().items()}

    def load_replay_buffer_state_dict(self, state_dict: dict) -> None:
        """Restores ``replay_buffer_state_dict()`` output; if the buffer does not exist yet
        (it is built from the first unroll's experience), it is restored right after it is
        built.

        Raises:
            ValueError: from ``ReplayBuffer.load_state_dict`` (naming the keys that differ),
                if the buffer exists; if it does not, when the state's environments x steps
                differ from what the configuration builds (``load.num_envs`` x
                ``adjust_replay_buffer_length``), so that the mismatch is found before
                training resumes rather than at the first unroll.
        """
        prefix = "_replay_buffer."
        state = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
        if self.replay_buffer is None:
            found = state.get("time_step|step_type")
            if self._config is not None and found is not None:
                path = self._training_path()
                expected = (self._num_envs, path.length)
                if tuple(found.shape[:2]) != expected:
                    length = path.length_setting
                    raise ValueError(
                        f"{self._name}: the checkpoint's replay buffer holds {found.shape[0]} "
                        f"environments x {found.shape[1]} steps, this configuration's "
                        f"{expected[0]} x {expected[1]} (load.num_envs x {length})")
            self._training_path().pending_state = state
        else:
            self.replay_buffer.load_state_dict(state)

    # ------------------------------------------------------------------ offline data
    def offline_experience_spec(self) -> Experience:
        """Spec of one step of offline data: what ``load_offline_replay_buffer`` reads from a
        replay checkpoint (by key) and what ``train_step`` then receives.

        The default is the time step (without ``env_info``), the action, and the
        ``rollout_info`` that ``rollout_step`` records (``rollout_info_spec_probe``), with no
        state: ``train_step`` gets offline steps in the layout of online ones, the recorded
        action included (``rollout_info|action``; ``offline_replay_aliases`` finds it in
        ALF's and other algorithms' files). Override it to read less or more.
        """
        ts = time_step_spec(self._observation_spec, self._action_spec, self._reward_spec)
        action = self._action_spec

        def _bounded(path, spec):  # the recorded action keeps its bounds (checked, rescaled)
            fits = (isinstance(action, TensorSpec) and path.split(".")[-1] == "action"
                    and spec.shape == action.shape and spec.dtype == action.dtype)
            return action if fits else spec

        info = nest.map_structure_with_path(_bounded, self.rollout_info_spec_probe())
        return Experience(time_step=ts._replace(env_info={}), action=action,
                          rollout_info=info, state=())

    def rollout_info_spec_probe(self) -> Any:
        """The spec of ``rollout_step``'s info, found by one ``rollout_step`` on a zero
        ``FIRST`` step of one environment (``_probe_rollout_step``), so that it is known
        before any unroll.

        Returns:
            Nest of ``TensorSpec`` of one step (no batch dim); ``()`` if it records none.
        """
        info = self._probe_rollout_step().info
        return spec_from_tensors(nest.map_structure(lambda x: x.cpu(), info))

    def _probe_rollout_step(self) -> AlgStep:
        """``rollout_step`` on a zero ``FIRST`` step of one environment, in eval mode,
        without gradients, with torch's random state restored afterwards (so that a run's
        random numbers do not depend on it)."""
        ts_spec = time_step_spec(self._observation_spec, self._action_spec, self._reward_spec)
        time_step = nest.map_structure(lambda spec: spec.zeros((1,)).to(self._device),
                                       ts_spec._replace(env_info={}))
        time_step = time_step._replace(step_type=torch.full_like(time_step.step_type,
                                                                 int(StepType.FIRST)))
        was_training = self.training
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            self.train(False)
            try:
                return self.rollout_step(time_step, self.get_initial_rollout_state(1))
            finally:
                self.train(was_training)

    def offline_replay_aliases(self) -> Dict[str, Any]:
        """``{key of offline_experience_spec: key in the file, or a list of keys tried in
        order}`` for data stored under other names. The default finds a recorded action that
        ``rollout_info`` asks for (``rollout_info|action``) under ALF's name
        (``rollout_info|rl|action``) or as the file's top-level ``action`` (every rlf and ALF
        file has it)."""
        return {"rollout_info|action": ["rollout_info|rl|action", "action"]}

    def load_offline_replay_buffer(self) -> None:
        """Builds the offline buffer from ``config.offline_buffer_dir`` (a replay checkpoint
        file or a list of them; rlf's ``replay_buffer-<iteration>.pt`` or ALF's), taking
        ``config.offline_buffer_length`` steps per environment (all if None). Tensors are
        matched to ``offline_experience_spec()`` by key.

        Training then samples from it: only from it while there is no online data
        (``unroll_length = 0`` trains purely offline), and for ``config.offline_fraction`` of
        each batch in hybrid training.

        ``config.offline_buffer_dir`` may also name a directory (every ``*.pt`` in it, in
        name order). Bounded actions are checked against the action spec's bounds, and
        rescaled from [-1, 1] with ``config.offline_normalized_actions`` (ALF's files); the
        recorded behaviour-distribution parameters are used as recorded.

        Raises:
            OfflineDataError: (a ``ValueError``) for a missing file or key, an inconsistent
                file, a shape that does not fit the spec, or actions outside the bounds or
                looking normalised (``make_offline_replay_buffer``), naming the file and key.
        """
        settings = offline_data_settings(self._config)
        if settings is None:
            return
        self._training_path().offline = make_offline_replay_buffer(
            settings["files"], self.offline_experience_spec(), length=settings["length"],
            aliases=self.offline_replay_aliases(), name=f"{self._name}_offline_replay_buffer",
            action_spec=self._action_spec, normalized_actions=settings["normalized_actions"],
            buffer_ctor=self._replay_buffer_ctor)
        logger.info("loaded offline replay data: %d steps in %d environments",
                    self.offline_replay_buffer.total_size,
                    self.offline_replay_buffer.num_environments)
        normalizers = self.observation_normalizers()
        if normalizers and all(int(n.count) == 0 for n in normalizers):
            self.update_observation_normalizers(
                self.offline_replay_buffer.gather_held().time_step.observation)

    # ------------------------------------------------------------------ normalizers
    def observation_normalizers(self) -> List[ObservationNormalizer]:
        """Every ``ObservationNormalizer`` among this algorithm's modules (its networks', its
        target networks', its sub-algorithms'), in ``named_modules`` order."""
        return [m for m in self.modules() if isinstance(m, ObservationNormalizer)]

    def update_observation_normalizers(self, observation: Any) -> None:
        """Merges observations into the statistics of every ``observation_normalizers()``, so
        that all of them (online and target networks alike) hold the same statistics.

        ``train_iter`` calls it with each new unroll's ``[T, B, ...]`` observations after
        training on that unroll, so a rollout and the training on its experience standardise
        with the same statistics (PPO's importance ratios start at 1), and actors receive the
        new ones with the next parameter update. ``load_offline_replay_buffer`` calls it once
        with the whole offline buffer when no normalizer has seen anything yet (a resumed
        run's checkpoint then restores its statistics).

        Args:
            observation: ``[..., *shape]`` observations, one tensor.

        Raises:
            ValueError: for a nested observation, or one whose shape does not end with a
                normalizer's.
        """
        normalizers = self.observation_normalizers()
        if not normalizers:
            return
        if not isinstance(observation, torch.Tensor):
            raise ValueError(f"{self._name}: ObservationNormalizer takes one observation "
                             f"tensor, the observation is a {type(observation).__name__}")
        for normalizer in normalizers:
            normalizer.update(observation)

    # ------------------------------------------------------------------ unroll
    def unroll(self, unroll_length: int) -> Optional[Experience]:
        """Collects ``unroll_length`` steps of every environment with ``rollout_step``.

        Every time step is fed to the metrics and, for off-policy algorithms, every step of
        experience to the replay buffer.

        Returns:
            ``[T, B]`` ``Experience`` (``rollout_info`` keeps its graph when gradients are
            enabled), or None if ``unroll_length`` is 0.
        """
        if self._unroller is None:
            raise RuntimeError(f"{self._name}: no unroller; the Trainer sets one (outside a "
                               f"Trainer: algorithm.set_unroller(SyncUnroller(env, algorithm)))")
        experience = self._unroller.unroll(unroll_length)
        for name, seconds in self._unroller.times.items():
            summary.add_time(f"time/{name}", seconds)
        if self._unroller.uses_actors:
            summary.scalar("async_unroll/policy_lag", self._unroller.policy_lag)
            summary.scalar("async_unroll/actor_restarts", self._unroller.restarts)
        if experience is None:
            return None
        if self._rollout_info_spec is None:
            self._rollout_info_spec = spec_from_tensors(experience.rollout_info, outer_rank=2)
        stored = detach(nest.utils.convert_device(experience, "cpu"))
        t0 = time.perf_counter()
        self.observe_for_metrics(stored.time_step)
        t1 = time.perf_counter()
        if not self.on_policy:
            self._training_path().observe(stored)
        summary.add_time("time/metrics", t1 - t0)
        summary.add_time("time/replay", time.perf_counter() - t1)
        return experience

    # ------------------------------------------------------------------ training
    def train_iter(self) -> int:
        """One training iteration (unroll, then train).

        Returns:
            Steps trained on (with repetitions).

        Raises:
            ActorError: if an actor of an async unroller failed; the iteration then changed
                nothing (its unroll is where actors are waited for).
        """
        counter = summary.get_global_counter()
        self._counters.train_iter_num += 1
        if self._config.empty_cache and torch.cuda.is_available():
            torch.cuda.empty_cache()
        try:
            if self.on_policy:
                steps = self._train_iter_on_policy()
            else:
                steps = self._train_iter_off_policy()
        except ActorError:
            # The unroll failed before anything was observed or trained: undo the counters,
            # so that a checkpoint written now is the state after the last whole iteration.
            self._counters.train_iter_num -= 1
            summary.set_global_counter(counter)
            raise
        if (self._unroller is not None and self.train_iter_num
                % self._config.unroll_parameter_update_period == 0):
            self._unroller.update_parameters()
        return steps

    def _train_iter_on_policy(self) -> int:
        path = self._training_path()
        summary.increment_global_counter()
        with summary.record_time("time/unroll"), torch.set_grad_enabled(
                path.grad_in_unroll), self._autocast():
            self.train()
            experience = self.unroll(int(self._config.unroll_length))
        self.summarize_rollout(experience)
        self.summarize_metrics()
        with summary.record_time("time/train"):
            train_info = experience.rollout_info
            experience = experience._replace(rollout_info=())
            steps = self._train_on_unroll(experience, train_info)
        with summary.record_time("time/after_train_iter"):
            self.after_train_iter(experience.time_step, train_info)
        self.update_observation_normalizers(experience.time_step.observation)
        return steps

    def _train_iter_off_policy(self) -> int:
        config, path = self._config, self._training_path()
        if not path.mini_batches.counter_per_mini_batch:
            summary.increment_global_counter()
        length = self._remaining_unroll_length_fraction + config.unroll_length
        self._remaining_unroll_length_fraction = length - int(length)
        length = int(length)
        experience = None
        if length > 0 and (config.num_env_steps == 0
                           or self.get_env_steps() < config.num_env_steps):
            with summary.record_time("time/unroll"), torch.set_grad_enabled(
                    path.grad_in_unroll), self._autocast():
                self.eval()
                experience = self.unroll(length)
            self.summarize_rollout(experience)
            self.summarize_metrics()
        steps = 0
        if self.replay_buffer is not None or self.offline_replay_buffer is not None:
            self.train()
            with summary.record_time("time/train"):
                steps = self._train_on_batches(path.batches(update_global_counter=True))
            with summary.record_time("time/after_train_iter"):
                if experience is None:
                    self.after_train_iter(None, None)
                else:
                    self.after_train_iter(experience.time_step, experience.rollout_info)
        if experience is not None:
            self.update_observation_normalizers(experience.time_step.observation)
        return steps

    def _train_on_unroll(self, experience: Experience, train_info: Any) -> int:
        """Trains on one on-policy unroll (``[T, B]``, ``rollout_info`` removed; its
        ``[T, B]`` ``train_info`` with the rollout's graph on the ``"rollout_graph"`` path)
        through the data path; returns the steps trained on."""
        path = self._training_path()
        if isinstance(path, RolloutGraph):
            return self._learner.update_on_rollout(experience, train_info)
        path.observe(experience._replace(rollout_info=train_info))
        return self._train_on_batches(path.batches())

    def _train_on_batches(self, batches) -> int:
        """One ``Learner.update`` per batch; returns the steps trained on."""
        return sum(self._learner.update(batch) for batch in batches)

    def train_from_unroll(self, experience: Experience, train_info: Any) -> int:
        """Deprecated (removed in rlf 0.3): ``train_iter`` trains each unroll through the
        data path (``rlf.algorithms.data_paths``). Trains on one on-policy unroll; returns
        the steps trained on."""
        warn_deprecated("RLAlgorithm.train_from_unroll", "train_iter() (the data path's "
                        "observe and batches, rlf.algorithms.data_paths)")
        return self._train_on_unroll(experience, train_info)

    def train_from_replay_buffer(self, update_global_counter: bool = False) -> int:
        """Deprecated (removed in rlf 0.3): ``train_iter`` trains through the data path
        (``rlf.algorithms.data_paths``). Trains on the replay buffer's (or the offline
        data's) batches of one iteration; returns the steps trained on (0 before the buffer
        holds ``initial_collect_steps`` steps)."""
        warn_deprecated("RLAlgorithm.train_from_replay_buffer", "train_iter() (the data "
                        "path's batches, rlf.algorithms.data_paths)")
        return self._train_on_batches(self._training_path().batches(update_global_counter))

    def train_epochs(self, experience: Experience, batch_info: Any, num_epochs: int,
                     shuffle: bool, mix_offline: bool = False,
                     update_global_counter: bool = False) -> int:
        """Deprecated (removed in rlf 0.3): the data path's ``MiniBatches.epochs`` yields the
        mini-batches and ``Learner.update`` trains on each. Trains ``num_epochs`` epochs of
        mini-batches over a batch-major ``[N, L]`` experience; returns the steps trained on."""
        warn_deprecated("RLAlgorithm.train_epochs", "train_iter() (MiniBatches.epochs and "
                        "Learner.update, rlf.algorithms.data_paths)")
        path = self._training_path()
        mixer = path.offline_mixer() if mix_offline else None
        return self._train_on_batches(path.mini_batches.epochs(
            self, experience, batch_info, num_epochs, shuffle, mixer, update_global_counter))

    @property
    def replay_buffer(self):
        """The replay buffer (the data path's), or None (on-policy algorithms, or before the
        first unroll)."""
        return getattr(self._path, "buffer", None)

    @property
    def offline_replay_buffer(self):
        """The buffer of offline data (``load_offline_replay_buffer``; the data path's), or
        None."""
        return getattr(self._path, "offline", None)

    # ------------------------------------------------------------------ summaries
    def summarize_train(self, experience: Experience, train_info: Any, loss_info,
                        params: List[nn.Parameter]) -> None:
        """Summaries after an update: parameter and gradient histograms and norms when
        ``config.summarize_grads_and_vars``. Loss terms, gradient norms and learning rates
        are written by ``update_with_gradient``."""
        if (self._config is None or not self._config.summarize_grads_and_vars
                or not summary.should_record_summaries()):
            return
        for name, p in self.named_parameters():
            summary.histogram(f"summarize_vars/{name}/value", p)
            summary.scalar(f"summarize_vars/{name}/norm", p.detach().norm())
            if p.grad is not None:
                summary.histogram(f"summarize_grads/{name}/value", p.grad)
                summary.scalar(f"summarize_grads/{name}/norm", p.grad.norm())

    def summarize_rollout(self, experience: Optional[Experience]) -> None:
        """Summaries of an unroll: rewards and actions (when recorded). Override to add more.

        Args:
            experience: the ``[T, B]`` unroll, or None.
        """
        if experience is None or not summary.should_record_summaries():
            return
        reward = experience.time_step.reward
        if reward.ndim == 2:
            summary.scalar("rollout_reward/mean", reward.mean())
        else:
            for i in range(reward.shape[-1]):
                summary.scalar(f"rollout_reward/{i}/mean", reward[..., i].mean())
        if self._config.summarize_action_distributions:
            for path, action in nest.flatten_with_path(experience.action):
                tag = "rollout_action" + (f"/{path}" if path else "")
                summary.histogram(tag, action)
                summary.scalar(f"{tag}/mean", action.float().mean())
                if action.numel() > 1:  # the sample std of one action is undefined (NaN)
                    summary.scalar(f"{tag}/std", action.float().std())

    # ------------------------------------------------------------------ lifecycle
    def finish_train(self) -> None:
        """Releases what training holds (actor processes of async unrollers)."""
        if self._unroller is not None:
            self._unroller.close()

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True, assign=False):
        """``Algorithm.load_state_dict``; metric state the checkpoint lacks (added to rlf
        after the checkpoint was written) keeps this algorithm's value (the initial one in a
        new algorithm, as at a resume), while every other key is checked as usual: a whole
        metric starts fresh, with a warning; a metric's new counters (e.g. the
        ``new_episodes`` sums) silently.

        Raises:
            ValueError: see ``Algorithm.load_state_dict``.
        """
        own = nn.Module.state_dict(self)
        missing = [k for k in own if k.startswith("_metrics.") and k not in state_dict]
        if missing:
            state_dict = dict(state_dict)
            state_dict.update({k: own[k] for k in missing})
            present = {k.split(".")[1] for k in state_dict if k.startswith("_metrics.")
                       and k not in missing}
            fresh = sorted({k.split(".")[1] for k in missing} - present, key=int)
            if fresh:
                logger.warning(
                    "%s: the checkpoint has no state for metrics %s; they start fresh",
                    self._name, [type(self._metrics[int(i)]).__name__ for i in fresh])
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def get_extra_state(self):
        """``Algorithm``'s extra state plus the carried fraction of ``unroll_length`` and the
        data path's (on-policy epochs: the previous unroll's last step, ``last_unroll_step``;
        None otherwise)."""
        state = super().get_extra_state()
        state["last_unroll_step"] = None
        if self._path is not None:
            state.update(self._path.get_extra_state())
        state["remaining_unroll_length_fraction"] = self._remaining_unroll_length_fraction
        return state

    def set_extra_state(self, state):
        """Restores ``get_extra_state()`` output (the data path's part builds the path)."""
        super().set_extra_state(state)
        self._remaining_unroll_length_fraction = float(
            state.get("remaining_unroll_length_fraction", 0.0))
        if self._config is not None and state.get("last_unroll_step") is not None:
            self._training_path().set_extra_state(state)
