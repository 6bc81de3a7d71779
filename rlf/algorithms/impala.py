"""ImpalaAlgorithm: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

Experience layout (docs/design.md, "Data conventions"): step ``t`` holds ``x_t``, the action
``a_t`` and the reward and discount of the transition *into* ``x_t``. So the transition
``x_t -> x_{t+1}`` has reward ``reward[t+1]`` and discount ``gamma * discount[t+1]`` (0 after
a termination, ``gamma`` after a truncation, whose final observation's value is bootstrapped).
A step whose ``step_type`` is LAST starts no transition (the next step is another episode's
FIRST): V-trace gives it importance weight 0, which both zeroes its TD error and cuts the trace
there, so the value target of a truncated episode's last state is its own value. Its loss is
masked too. A FIRST step that follows anything but LAST means the episode before it was cut
(its environment was restarted: a resume with a saved replay buffer, a restarted actor); the
step before it is then treated as a truncated episode's last state, not as a transition into
another episode.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple, Union

import gin
import torch

from rlf import nest
from rlf.algorithms import vtrace
from rlf.algorithms.config_parts import without_effect
from rlf.algorithms.data_needs import TRANSITIONS
from rlf.algorithms.mixing import ExperienceSource
from rlf.algorithms.memories import NotCheckpointed
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.schedules import StepSchedule
from rlf.algorithms.target_network import TargetUpdater, make_target_network
from rlf.data_structures import AlgStep, LossInfo, starts_transition
from rlf.networks import ActorCriticNetwork, ClipToBounds
from rlf.networks.actor_critic import greedy_action
from rlf.replay import ReplayBuffer, UniformSampler
from rlf.tensor_specs import spec_from_tensors
from rlf.utils import summary
from rlf.utils.deprecation import renamed

__all__ = ["ImpalaAlgorithm", "ImpalaRolloutInfo", "ImpalaInfo"]


class ImpalaRolloutInfo(NamedTuple):
    """Stored with each step: the action and the behaviour policy's parameters ``mu``
    (logits ``[B, N]``, a tuple of logits, or ``(loc, scale)``)."""

    action: Any = ()
    behaviour_params: Any = ()


class ImpalaInfo(NamedTuple):
    """``[T, B]`` training information for ``calc_loss``; ``proximal_params`` (the proximal
    policy's parameters, ``proximal_policy``) is ``()`` without one."""

    reward: Any = ()
    step_type: Any = ()
    discount: Any = ()
    action: Any = ()
    behaviour_params: Any = ()
    target_params: Any = ()
    value: Any = ()
    proximal_params: Any = ()


@gin.configurable
class ImpalaAlgorithm(RLAlgorithm):
    """IMPALA's learner: policy gradient with V-trace advantages, a V-trace value baseline and
    an entropy bonus.

    Off-policy by default: each unroll goes through the replay buffer and ``train_step``
    recomputes the target policy and values over ``[T, B]`` (with the recurrent state when
    the network has an LSTM). With ``is_on_policy=True`` it trains on the rollout's own
    forward pass (ALF's ``unroll_with_grad``; then ``pi == mu`` and V-trace reduces to n-step
    returns), which saves the second forward pass.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords).
        network_ctor: ``network_ctor(observation_spec, action_spec)`` ->
            ``ActorCriticNetwork``-like module returning ``(params, value, state)`` and with
            ``state_spec`` and ``policy_head``.
        gamma: the discount ``gamma`` of the returns.
        entropy_regularization: weight of the entropy bonus: a float, or a schedule of
            ``(environment_steps, weight)`` pairs with increasing steps, interpolated
            linearly in ``EnvironmentSteps`` (agent steps) and constant outside them, in
            RLlib's ``entropy_coeff`` format, e.g. ``[(0, 0.01), (2500000, 0.0)]``.
        td_loss_weight: weight of the baseline loss ``0.5 * (vs - V)^2`` (the paper's
            "baseline cost").
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold: V-trace's
            ``rho_bar``, ``c_bar`` and the policy gradient's ``rho`` clip.
        td_lambda: V-trace's trace coefficient ``lambda`` (§4.2: ``c_s = lambda min(c_bar,
            rho_s)``); 1 is the paper's default.
        importance_ratio_clipping: ``epsilon`` of PPO's clipped surrogate (Schulman et al.
            2017, eq. 7; ALF's ``PPOLoss`` name), which then replaces the policy-gradient
            term, as in APPO (RLlib's ``clip_param``, 0.3 for Pong): ``-min(r_t A_t,
            clip(r_t, 1 - epsilon, 1 + epsilon) A_t)`` with ``r_t = pi(a_t|x_t) /
            mu(a_t|x_t)`` and ``A_t = r_{t+1} + gamma_{t+1} vs_{t+1} - V(x_t)``, V-trace's
            advantage before its ``rho`` factor (``r_t`` takes that role). It stops pushing
            ``pi`` once it is ``epsilon`` away from ``mu``, so that several passes over the
            same unroll (``TrainerConfig.num_updates_per_train_iter``) cannot overshoot.
            None (default): IMPALA's ``-min(rho_t, clip_pg_rho_threshold) A_t log pi``.
        proximal_policy: take the clipped surrogate's ratio against a proximal policy
            ``pi_prox`` instead of ``mu``: the decoupled objective of Hilton et al. 2022
            ("Batch size-invariance for policy optimization", NeurIPS; RLlib's APPO target
            network), ``-min(clip_pg_rho_threshold, pi_prox / mu) min(r_t A_t, clip(r_t, 1 -
            epsilon, 1 + epsilon) A_t)`` with ``r_t = pi / pi_prox``. ``pi_prox`` is a copy of
            the network made after each training iteration (``after_train_iter``), so where
            ``mu`` acted with the parameters of the iteration before (the fixed lag of
            ``TrainerConfig.deterministic``) ``pi_prox = mu`` on the unroll's own steps and the
            loss is the plain surrogate's; replayed steps, whose ``mu`` is older, are clipped
            around ``pi_prox`` (around ``mu`` many lie outside the clip range, where a positive
            advantage gets no gradient) and weighted by the truncated ``pi_prox / mu``. One more
            forward pass per update (no backward). Needs ``importance_ratio_clipping``,
            off-policy training and a feed-forward network.
        is_on_policy: see above.
        experience_replay_fraction: the fraction of each training batch sampled from an
            experience-replay memory (Espeholt et al. 2018, §5.3.2, used 0.5); 0 for none.
            Off-policy only. Each mini-batch of ``N`` online sequences gets
            ``round(N * f / (1 - f))`` replayed sequences of the same length; V-trace
            corrects for their older behaviour policy.
        experience_replay_length: steps per environment the memory holds.
        max_use: how often a step may start a replayed sequence (DI-engine's ``max_use``).
        experience_replay_stacked_frames: ``ReplayBuffer``'s ``stacked_frames`` for the
            memory, e.g. ``{"time_step.observation": 4}`` for Atari (one frame stored per
            step).
        optimizer, gradient_clipping, name, ...: see ``Algorithm``.
        discount, value_weight, lambda_: deprecated names of ``gamma``, ``td_loss_weight``
            and ``td_lambda`` (they warn once).

    Raises:
        ValueError: for an action spec the policy heads do not serve (naming it); for an
            ``entropy_regularization`` schedule that is empty, not made of pairs, or whose
            steps are negative or not increasing; for ``importance_ratio_clipping <= 0``; for
            ``gamma`` or ``td_lambda`` outside ``[0, 1]``; for a negative ``td_loss_weight``;
            for ``proximal_policy`` without ``importance_ratio_clipping``, on-policy or with a
            recurrent network (it would do nothing, or its state is not kept); for a memory
            setting (``experience_replay_length``, ``max_use``,
            ``experience_replay_stacked_frames``) without ``experience_replay_fraction``.
    """

    def __init__(self,
                 observation_spec,
                 action_spec,
                 network_ctor=ActorCriticNetwork,
                 gamma: float = 0.99,
                 entropy_regularization: Union[float, Sequence[Tuple[int, float]]] = 0.01,
                 td_loss_weight: float = 0.5,
                 clip_rho_threshold: Optional[float] = 1.0,
                 clip_c_threshold: Optional[float] = 1.0,
                 clip_pg_rho_threshold: Optional[float] = 1.0,
                 td_lambda: float = 1.0,
                 importance_ratio_clipping: Optional[float] = None,
                 proximal_policy: bool = False,
                 is_on_policy: bool = False,
                 experience_replay_fraction: float = 0.0,
                 experience_replay_length: int = 10000,
                 max_use: Optional[int] = None,
                 experience_replay_stacked_frames: Optional[dict] = None,
                 name: str = "ImpalaAlgorithm",
                 discount: Optional[float] = None,
                 value_weight: Optional[float] = None,
                 lambda_: Optional[float] = None,
                 **kwargs):
        gamma = renamed("ImpalaAlgorithm", "gamma", gamma, "discount", discount, 0.99)
        td_loss_weight = renamed("ImpalaAlgorithm", "td_loss_weight", td_loss_weight,
                                 "value_weight", value_weight, 0.5)
        td_lambda = renamed("ImpalaAlgorithm", "td_lambda", td_lambda, "lambda_", lambda_, 1.0)
        check_unit_interval(name, gamma=gamma, td_lambda=td_lambda)
        if not td_loss_weight >= 0:
            raise ValueError(f"{name}: td_loss_weight must be >= 0 (a negative weight would "
                             f"maximise the value error), got {td_loss_weight}")
        if not 0.0 <= experience_replay_fraction < 1.0:
            raise ValueError(f"{name}: experience_replay_fraction must be in [0, 1), got "
                             f"{experience_replay_fraction}")
        if importance_ratio_clipping is not None and not importance_ratio_clipping > 0:
            raise ValueError(f"{name}: importance_ratio_clipping must be > 0 or None, got "
                             f"{importance_ratio_clipping}")
        if experience_replay_fraction and is_on_policy:
            raise ValueError(f"{name}: experience replay needs is_on_policy=False")
        memory = [f"{k} = {v!r}" for k, v, default in (
            ("experience_replay_length", experience_replay_length, 10000),
            ("max_use", max_use, None),
            ("experience_replay_stacked_frames", experience_replay_stacked_frames, None))
            if v != default]
        if memory and not experience_replay_fraction:
            raise ValueError(without_effect(
                memory, "with experience replay",
                "set experience_replay_fraction > 0 too, or remove {it}", owner=name))
        if proximal_policy and (importance_ratio_clipping is None or is_on_policy):
            raise ValueError(f"{name}: proximal_policy changes the clipped surrogate's ratio, "
                             f"so it needs importance_ratio_clipping and is_on_policy=False "
                             f"(on-policy pi_prox = mu); set both or drop proximal_policy")
        network = network_ctor(observation_spec, action_spec)
        if proximal_policy and nest.flatten(network.state_spec):
            raise ValueError(f"{name}: proximal_policy needs a feed-forward network (the "
                             f"proximal policy keeps no recurrent state); drop it or the LSTM")
        super().__init__(observation_spec, action_spec, train_state_spec=network.state_spec,
                         is_on_policy=is_on_policy, name=name, metric_discount=gamma,
                         data_needs=TRANSITIONS, **kwargs)
        self._network = network
        # pi_prox: a copy of the network, refreshed after each training iteration
        self._proximal_network: Optional[torch.nn.Module] = None
        self._proximal_updater: Optional[TargetUpdater] = None
        if proximal_policy:
            self._proximal_network = make_target_network(network)
            self._proximal_updater = TargetUpdater([network], [self._proximal_network])
        self._memory_ctor = kwargs.get("replay_buffer_ctor") or ReplayBuffer
        self._to_env = ClipToBounds(action_spec)
        self._gamma = gamma
        self._entropy_schedule = StepSchedule(entropy_regularization,
                                             f"{name}.entropy_regularization")
        self._td_loss_weight = td_loss_weight
        self._clips = (clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold)
        self._td_lambda = td_lambda
        self._ratio_clipping = importance_ratio_clipping
        self._replay_fraction = experience_replay_fraction
        self._memory_args: Dict[str, Any] = dict(
            max_length=experience_replay_length, sampler=UniformSampler(max_use),
            stacked_frames=experience_replay_stacked_frames)
        # the experience-replay memory, outside the module tree (so not in the algorithm's
        # checkpoint; the data path's save_replay_buffer carries it: experience_sources)
        self._memory = NotCheckpointed(buffer=None)

    @property
    def entropy_regularization(self) -> float:
        """The entropy bonus's weight at the current ``EnvironmentSteps``."""
        return self._entropy_schedule(self.get_env_steps())

    @property
    def experience_replay_memory(self):
        """The experience-replay ``ReplayBuffer`` (None until the data path has its replay
        buffer, or without ``experience_replay_fraction``)."""
        return self._memory.buffer

    def observe_for_replay(self, exp) -> None:
        """Deprecated, and does nothing: the experience-replay source's ``observe`` stores
        each step in the memory (``experience_sources``). Kept for one release so that an
        override calling ``super().observe_for_replay(exp)`` still runs."""

    observe_for_replay._rlf_no_op = True  # type: ignore[attr-defined]  # (not an observer)

    def _make_memory(self, spec, num_environments: int) -> ReplayBuffer:
        """Makes the memory for steps of ``spec`` from ``num_environments`` environments."""
        self._memory.buffer = self._memory_ctor(
            data_spec=spec, num_environments=num_environments,
            name=f"{self._name}_experience_replay", **self._memory_args)
        return self._memory.buffer

    def _remember(self, exp) -> None:
        """Stores the step (stored in the training buffer already) in the memory too."""
        self._memory.buffer.add_batch(exp, exp.time_step.env_id)

    def experience_sources(self) -> Sequence[ExperienceSource]:
        """With experience replay, its memory, which keeps each stored step: each mini-batch
        of ``N`` sequences gets ``round(N * f / (1 - f))`` sequences sampled from it, once it
        holds a sequence that ``max_use`` has not exhausted. The data path makes the memory
        with its replay buffer, and checkpoints with ``TrainerConfig.save_replay_buffer``
        carry it."""
        if not self._replay_fraction:
            return ()
        return (ExperienceSource("experience_replay", self._replayed, self._replay_fraction,
                                 observe=self._remember, memory=self._make_memory),)

    def _replayed(self, experience, k: int):
        """``k`` sequences from the memory as long as ``experience``'s, or None while it holds
        no more history than the online data, or every eligible step reached max_use."""
        memory = self.experience_replay_memory
        length = nest.flatten(experience)[0].shape[1]
        if memory is None or int(memory.current_size.min()) < length + 1:
            return None
        try:
            return memory.get_batch(k, length)[0]
        except ValueError:  # every eligible step reached max_use
            return None

    @property
    def network(self):
        """The actor-critic network."""
        return self._network

    def offline_layout(self):
        """Offline data for IMPALA carries the recorded action and behaviour policy
        (``rollout_info|action``, ``rollout_info|behaviour_params...``), so V-trace corrects
        for the policy that collected it; ALF's names for a Normal behaviour policy
        (``rollout_info|rl|...``) are aliases. ALF's SAC records a tanh-squashed Normal; its
        importance weights against rlf's unsquashed ``NormalHead`` are then only
        approximate."""
        layout = super().offline_layout()
        with torch.no_grad():
            obs = nest.map_structure(lambda s: s.zeros((1,)), self._observation_spec)
            state = nest.map_structure(lambda s: s.zeros((1,)), self._network.state_spec)
            params = self._network(obs, state)[0]
        params_spec = spec_from_tensors(params)
        spec = layout.spec._replace(rollout_info=ImpalaRolloutInfo(
            action=self._action_spec, behaviour_params=params_spec))
        return layout._replace(spec=spec, aliases={
            **layout.aliases,
            "rollout_info|behaviour_params|0": "rollout_info|rl|action_distribution|loc",
            "rollout_info|behaviour_params|1": "rollout_info|rl|action_distribution|scale"})

    def _step(self, time_step, state, action=None):
        params, value, state = self._network(time_step.observation, state)
        if action is None:
            with torch.no_grad():
                action = self._network.policy_head.sample(params)
        return params, value, state, action

    def predict_step(self, time_step, state) -> AlgStep:
        """Greedy action (the mode of the policy; clipped to a Box's bounds)."""
        action, state = greedy_action(self._network, time_step.observation, state)
        return AlgStep(output=self._to_env(action), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """Samples ``a ~ mu(.|x)``; records ``mu``'s parameters (and, on-policy, the whole
        ``ImpalaInfo`` with its graph). The environment gets ``a`` clipped to a Box's bounds;
        ``a`` itself is what is trained on."""
        params, value, new_state, action = self._step(time_step, state)
        info: Any
        if self.on_policy:
            info = self._info(time_step, action, nest.map_structure(torch.detach, params),
                              params, value)
        else:
            info = ImpalaRolloutInfo(action=action, behaviour_params=params)
        return AlgStep(output=self._to_env(action), state=new_state, info=info)

    def train_step(self, time_step, state, rollout_info: ImpalaRolloutInfo) -> AlgStep:
        """Recomputes the target policy ``pi`` and ``V`` for a replayed step (and the
        proximal policy's parameters, ``proximal_policy``)."""
        params, value, new_state, _ = self._step(time_step, state, rollout_info.action)
        proximal: Any = ()
        if self._proximal_network is not None:
            with torch.no_grad():
                proximal = self._proximal_network(time_step.observation, state)[0]
        return AlgStep(output=rollout_info.action, state=new_state,
                       info=self._info(time_step, rollout_info.action,
                                       rollout_info.behaviour_params, params, value, proximal))

    def _info(self, time_step, action, behaviour_params, target_params, value,
              proximal_params=()) -> ImpalaInfo:
        return ImpalaInfo(reward=self.weighted_reward(time_step.reward),
                          step_type=time_step.step_type, discount=time_step.discount,
                          action=action, behaviour_params=behaviour_params,
                          target_params=target_params, value=value,
                          proximal_params=proximal_params)

    def after_train_iter(self, root_inputs, rollout_info=None) -> None:
        """With ``proximal_policy``, copies the network into the proximal policy: the next
        iteration clips around the policy this one ends with."""
        if self._proximal_updater is not None:
            self._proximal_updater()

    def vtrace_returns(self, info: ImpalaInfo):
        """V-trace over the ``T - 1`` transitions of a ``[T, B]`` sequence.

        Returns:
            ``(returns, log_rhos, valid, target_log_probs)``: ``VTraceReturns`` with
            ``[T-1, B]`` ``vs`` and ``pg_advantages`` (detached); ``[T-1, B]`` log importance
            weights (-inf where step ``t`` starts no transition: it is LAST, or step
            ``t + 1`` is FIRST); ``[T-1, B]`` bool ``valid``; ``[T, B]`` ``log pi(a_t|x_t)``
            with gradient.
        """
        head = self._network.policy_head
        value = info.value.float()
        target_log_probs = head.log_prob(info.target_params, info.action)
        with torch.no_grad():
            behaviour_log_probs = head.log_prob(info.behaviour_params, info.action)
            valid = starts_transition(info.step_type)
            log_rhos = torch.where(valid, (target_log_probs - behaviour_log_probs)[:-1],
                                   torch.full_like(value[:-1], -float("inf")))
            returns = vtrace.from_importance_weights(
                log_rhos=log_rhos, discounts=self._gamma * info.discount[1:].float(),
                rewards=info.reward[1:].float(), values=value[:-1].detach(),
                bootstrap_value=value[-1].detach(), clip_rho_threshold=self._clips[0],
                clip_c_threshold=self._clips[1], clip_pg_rho_threshold=self._clips[2],
                lambda_=self._td_lambda)
        return returns, log_rhos, valid, target_log_probs

    def calc_loss(self, info: ImpalaInfo) -> LossInfo:
        """Policy-gradient, baseline and entropy losses over ``[T, B]`` (the last step, which
        has no successor in the sequence, carries no loss)."""
        head = self._network.policy_head
        value = info.value.float()
        returns, log_rhos, valid, target_log_probs = self.vtrace_returns(info)
        pad = torch.zeros_like(value[:1])
        if self._ratio_clipping is None:
            pg_loss = -returns.pg_advantages * target_log_probs[:-1]
        else:
            pg_loss = self._clipped_surrogate(info, value.detach(), returns.vs, log_rhos,
                                              valid, target_log_probs)
        pg_loss = torch.cat([pg_loss, pad])
        value_loss = torch.cat([0.5 * (returns.vs - value[:-1]) ** 2, pad])
        entropy = head.entropy(info.target_params)
        has_next = torch.ones_like(value)
        has_next[-1] = 0
        entropy_weight = self.entropy_regularization
        loss = (pg_loss + self._td_loss_weight * value_loss
                - entropy_weight * entropy * has_next)
        if summary.should_record_summaries():
            self._summarize_vtrace(log_rhos, valid, returns.vs, value[:-1])
            if not self._entropy_schedule.is_constant:
                summary.scalar(f"{self._name}/entropy_regularization", entropy_weight)
        return LossInfo(loss=loss, extra={"pg_loss": pg_loss, "value_loss": value_loss,
                                          "entropy": entropy})

    def _clipped_surrogate(self, info: ImpalaInfo, value, vs, log_rhos, valid,
                           target_log_probs):
        """``[T-1, B]`` PPO's clipped surrogate loss with V-trace's advantages (see
        ``importance_ratio_clipping``; around ``pi_prox``, weighted, with
        ``proximal_policy``); 0 where step ``t`` starts no transition. ``value``: ``[T, B]``
        float32, detached."""
        with torch.no_grad():
            vs_t_plus_1 = torch.cat([vs[1:], value[-1:]])
            advantages = (info.reward[1:].float() + self._gamma * info.discount[1:].float()
                          * vs_t_plus_1 - value[:-1]) * valid
        # log r_t = log pi - log mu, with pi's gradient; LAST steps (log_rhos -inf) get 0.
        log_pi = target_log_probs[:-1]
        log_ratio = log_rhos.masked_fill(~valid, 0.0)  # (detached)
        weight = None
        if self._proximal_network is not None:
            with torch.no_grad():  # r_t = pi / pi_prox, weighted by min(rho_bar, pi_prox / mu)
                log_prox = self._network.policy_head.log_prob(info.proximal_params,
                                                              info.action)[:-1]
                log_prox_over_pi = (log_prox - log_pi.detach()).masked_fill(~valid, 0.0)
                weight = torch.exp(log_ratio + log_prox_over_pi)
                if self._clips[2] is not None:
                    weight = weight.clamp(max=self._clips[2])
                log_ratio = -log_prox_over_pi
        ratio = torch.exp(log_pi - log_pi.detach() + log_ratio)
        eps = self._ratio_clipping
        assert eps is not None  # (the surrogate is used only with a clipping)
        if summary.should_record_summaries() and bool(valid.any()):
            summary.scalar(f"{self._name}/clipped_ratio_fraction",
                           ((ratio.detach() - 1).abs() > eps)[valid].float().mean())
        surrogate = -torch.min(ratio * advantages, ratio.clamp(1 - eps, 1 + eps) * advantages)
        return surrogate if weight is None else weight * surrogate

    def _summarize_vtrace(self, log_rhos, valid, vs, value) -> None:
        with torch.no_grad():
            rhos = log_rhos.exp()[valid]
            if rhos.numel():
                summary.scalar(f"{self._name}/mean_rho", rhos.mean())
                if self._clips[0] is not None:
                    summary.scalar(f"{self._name}/clipped_rho_fraction",
                                   (rhos > self._clips[0]).float().mean())
            vs, value = vs[valid], value[valid]
            if vs.numel() > 1:
                summary.scalar(f"{self._name}/explained_variance",
                               1 - (vs - value).var() / vs.var().clamp(min=1e-8))
