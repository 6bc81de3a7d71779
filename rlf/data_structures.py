"""The namedtuples that rlf's parts exchange: TimeStep, Experience, AlgStep, LossInfo.

Episode semantics (TF-Agents/ALF; see docs/design.md, "Data conventions"):

- ``StepType.FIRST`` (0) starts an episode: reward 0, discount 1, ``prev_action`` zeros.
- ``StepType.MID`` (1) is any other step within an episode.
- ``StepType.LAST`` (2) ends it and carries the final reward. Its ``discount`` is 0 if the
  episode *terminated* (no bootstrap) and 1 if it was *truncated* (e.g. a time limit: the
  value of the last observation still counts).
- Environments reset themselves: the step after a LAST is the FIRST of the next episode, and
  the action given at a LAST step is ignored. LAST -> FIRST is not a transition.
- A FIRST that follows a FIRST or MID step means the episode before it was cut: its
  environment was restarted (a resume with a saved replay buffer, a restarted actor). That is
  no transition either; the cut step is a truncated episode's last state
  (``starts_transition``).
- The reward and discount of the transition ``t -> t+1`` are stored in ``time_step[t+1]``.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import torch

from rlf import nest
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = [
    "StepType", "TimeStep", "Experience", "AlgStep", "LossInfo", "ReplacingMask", "RowSource",
    "make_experience", "experience_like", "time_step_spec", "starts_transition",
    "valid_step_mask", "RAW_REWARD", "ActorIdentity",
]

#: The ``TimeStep.env_info`` key of the unclipped reward, where the training reward is clipped
#: (Atari): summed over an episode it is the game's own score (``AverageEpisodeScore``).
RAW_REWARD = "raw_reward"


class StepType:
    """Step-type constants; stored in tensors of dtype ``torch.int32``."""

    FIRST = 0
    MID = 1
    LAST = 2
    dtype = torch.int32


def starts_transition(step_type: torch.Tensor) -> torch.Tensor:
    """Which steps of a sequence start a transition to the next step.

    Step ``t`` does unless it is LAST (the next step starts another episode) or step ``t+1``
    is FIRST (after a LAST that is the same boundary; after anything else the episode was
    cut by a restarted environment, and step ``t`` is its last state, as in a truncation).
    Losses that bootstrap across steps (V-trace, GAE) give the others no TD error and end
    their traces there.

    Args:
        step_type: ``[T, ...]`` int ``StepType`` values, time first (e.g. ``[T, B]``).

    Returns:
        ``[T-1, ...]`` bool.
    """
    return (step_type[:-1] != StepType.LAST) & (step_type[1:] != StepType.FIRST)


def valid_step_mask(step_type: torch.Tensor) -> torch.Tensor:
    """The loss mask of a sequence: which steps start a transition inside it.

    ``starts_transition`` with a False last row (the last step has no successor in the
    sequence). It removes LAST steps, steps before an episode cut and the final step. The
    training loops multiply a ``[T, B]`` per-step loss by it and a ``[T-1, B]`` loss over
    transitions by its first ``T - 1`` rows (which are ``starts_transition(step_type)``).
    Computed on a whole experience before it is split into mini-batches, it stays right for
    each piece, whose own last step may have a successor in the whole.

    Args:
        step_type: ``[T, ...]`` int ``StepType`` values, time first.

    Returns:
        ``[T, ...]`` bool.
    """
    return torch.cat([starts_transition(step_type),
                      torch.zeros_like(step_type[:1], dtype=torch.bool)])


class TimeStep(NamedTuple):
    """What an environment returns at one step, for a batch of ``B`` environments.

    Attributes:
        step_type: ``[B]`` int32, a ``StepType`` value.
        reward: ``[B]`` float32 (or ``[B, k]`` for vector rewards): reward of the transition
            into this step; 0 at FIRST.
        discount: ``[B]`` float32: 0 at a terminating LAST, else 1.
        observation: nest of ``[B, ...]`` tensors (uint8 frames stay uint8).
        prev_action: nest of ``[B, ...]``: the action that led to this step (zeros at FIRST).
        env_id: ``[B]`` int32: which environment each row comes from.
        env_info: dict of ``[B, ...]`` tensors, environment-specific (e.g. Atari ``lives``).
    """

    step_type: Any = ()
    reward: Any = ()
    discount: Any = ()
    observation: Any = ()
    prev_action: Any = ()
    env_id: Any = ()
    env_info: Any = {}

    def is_first(self) -> torch.Tensor:
        """``[B]`` bool: True where ``step_type == FIRST``."""
        return self.step_type == StepType.FIRST

    def is_mid(self) -> torch.Tensor:
        """``[B]`` bool: True where ``step_type == MID``."""
        return self.step_type == StepType.MID

    def is_last(self) -> torch.Tensor:
        """``[B]`` bool: True where ``step_type == LAST``."""
        return self.step_type == StepType.LAST


class AlgStep(NamedTuple):
    """What an algorithm's ``*_step`` returns.

    Attributes:
        output: nest, e.g. the action ``[B, ...]`` for ``rollout_step``/``predict_step``.
        state: nest matching the algorithm's state spec, for the next step.
        info: nest of per-step information (``rollout_info`` during rollout, e.g. the behaviour
            policy's logits; training info in ``train_step``).
    """

    output: Any = ()
    state: Any = ()
    info: Any = ()


class Experience(NamedTuple):
    """One step of collected experience, stored in replay and used in training.

    Leaves are ``[B, ...]`` when collected, ``[T, B, ...]`` in training.

    Attributes:
        time_step: the ``TimeStep`` the action was chosen at.
        action: nest, the action taken at ``time_step``.
        rollout_info: nest, the ``AlgStep.info`` of ``rollout_step`` (e.g. behaviour logits).
        state: nest, the algorithm's state *before* this step (for recurrent training).
    """

    time_step: Any = ()
    action: Any = ()
    rollout_info: Any = ()
    state: Any = ()


class LossInfo(NamedTuple):
    """What ``calc_loss`` returns.

    Attributes:
        loss: the loss to minimise: a float tensor ``[T, B, ...]`` per step, ``[T-k, B, ...]``
            over the sequence's first ``T - k`` steps (``k = 1``: transitions; ``k = n``:
            n-step targets), ``[B]`` per sequence, or a scalar; or a dict of such tensors
            keyed by optimizer name (``Algorithm.add_optimizer(name=...)``), each term
            training that optimizer's parameters only. ``update_with_gradient`` masks and
            averages each (``masked_loss_mean``).
        scalar_loss: a scalar loss added as is (e.g. a regulariser), or ``()``; with a dict
            ``loss``, a dict keyed like it.
        extra: nest of per-step loss terms for summaries (e.g. ``pg_loss``, ``value_loss``).
        priority: ``[B]`` priorities for prioritised replay, or ``()``.
        mask: ``()`` for the training loop's step mask (``valid_step_mask``, fitted to the
            loss's ``[T-k, B]`` rows), or float/bool weights of the loss's leading dims
            (``[T-k, B]``, ``[B]``), which multiply the step mask (e.g. 0 for the rows of
            one ``RowSource``), or a ``ReplacingMask`` of such weights, which replaces it
            (e.g. steps the step mask leaves out: a sequence's last step); a loss that fits
            no step mask (other leading dims) takes its own mask alone. With a dict ``loss``,
            a dict keyed like it (terms without a mask use the step mask).
    """

    loss: Any = ()
    scalar_loss: Any = ()
    extra: Any = ()
    priority: Any = ()
    mask: Any = ()


class ReplacingMask(NamedTuple):
    """A ``LossInfo.mask`` that replaces the training loop's step mask, where a plain mask
    multiplies it: for a loss over steps the step mask leaves out, such as behaviour
    cloning's every executed step, the last step of each sampled sequence included.

    Attributes:
        mask: float or bool weights of the loss's leading dims (``[T-k, B]`` or ``[B]``).
    """

    mask: Any


class RowSource(enum.IntEnum):
    """Where a row (a sequence) of a training mini-batch comes from
    (``Learner.row_sources``): the rows are in this order within the mini-batch."""

    #: The data path's own rows: sampled from the replay buffer, or the unroll's.
    SAMPLED = 0
    #: Offline data mixed in by hybrid training (``TrainerConfig.offline_fraction``).
    OFFLINE = 1
    #: Appended from the algorithm's ``experience_sources()`` (e.g. IMPALA's experience
    #: replay) or its deprecated ``mix_experience``.
    MIXED = 2


def make_experience(time_step: TimeStep, alg_step: AlgStep, state: Any) -> Experience:
    """Builds the ``Experience`` of one step.

    Args:
        time_step: ``[B, ...]`` TimeStep the action was taken at.
        alg_step: the ``AlgStep`` returned by ``rollout_step`` for ``time_step``.
        state: the state that was passed to ``rollout_step`` (before the step).

    Returns:
        ``Experience(time_step, action=alg_step.output, rollout_info=alg_step.info, state)``.
    """
    return Experience(time_step=time_step, action=alg_step.output,
                      rollout_info=alg_step.info, state=state)


def experience_like(template: Experience, num: int, **fields: Any) -> Experience:
    """A batch-major ``[num, T]`` ``Experience`` in the layout of ``template``, a mini-batch
    of the data path (the ``mini_batch`` an ``ExperienceSource``'s ``sample`` gets): the same
    nest structure, dtypes, trailing shapes and device, so that it can be appended to it
    (``rlf.nest.utils.cat_nests``), e.g. sequences from a learned model (Dyna).

    Args:
        template: a batch-major ``[N, T]`` ``Experience``.
        num: how many sequences to make.
        **fields: values by field name, of ``Experience`` (``action``, ``rollout_info``,
            ``state``) or of ``TimeStep`` (``observation``, ``reward``, ``discount``,
            ``step_type``, ``prev_action``, ``env_id``, ``env_info``): each a nest of the
            template's structure for that field with ``[num, T, ...]`` leaves, converted to
            the template's dtypes and device. Fields not given: ``step_type`` FIRST at the
            first step and MID after it (one episode through each sequence), ``discount``
            1, ``env_id`` -1 (no environment), zeros for the rest.

    Returns:
        The ``Experience``.

    Raises:
        ValueError: for a name that is no such field, a value whose nest structure is not
            the template's, or a leaf whose shape is not ``[num, T, ...]`` of the
            template's leaf.
    """
    unknown = sorted(set(fields) - set(TimeStep._fields) - {"action", "rollout_info", "state"})
    if unknown:
        raise ValueError(f"experience_like: {unknown} name no field of Experience "
                         f"(action, rollout_info, state) or of TimeStep {TimeStep._fields}")

    def made(name: str, like: Any, value: Any) -> Any:
        def leaf(t: torch.Tensor, v: Any) -> torch.Tensor:
            v = torch.as_tensor(v)
            want = (num,) + tuple(t.shape[1:])
            if tuple(v.shape) != want:
                raise ValueError(f"experience_like: {name} has a leaf of shape "
                                 f"{tuple(v.shape)} where the template's gives {want} "
                                 f"([num, T, ...])")
            return v.to(dtype=t.dtype, device=t.device)

        try:
            nest.assert_same_structure(like, value)
        except (ValueError, TypeError) as e:
            raise ValueError(f"experience_like: {name} is not of the template's structure "
                             f"({e})") from None
        return nest.map_structure(leaf, like, value)

    def default(name: str, like: Any) -> Any:
        fill = {"discount": 1, "env_id": -1}.get(name, 0)
        value = nest.map_structure(lambda t: torch.full((num,) + tuple(t.shape[1:]), fill,
                                                        dtype=t.dtype, device=t.device), like)
        if name == "step_type":
            value[:, 1:] = StepType.MID
        return value

    time_step = TimeStep(*(made(f, getattr(template.time_step, f), fields[f]) if f in fields
                           else default(f, getattr(template.time_step, f))
                           for f in TimeStep._fields))
    rest = {f: made(f, getattr(template, f), fields[f]) if f in fields
            else default(f, getattr(template, f)) for f in ("action", "rollout_info", "state")}
    return Experience(time_step=time_step, **rest)


def time_step_spec(observation_spec: Any, action_spec: Any, reward_spec: TensorSpec,
                   env_info_spec: Any = None) -> TimeStep:
    """The ``TimeStep`` of specs for an environment with the given specs.

    Args:
        observation_spec: nest of ``TensorSpec``.
        action_spec: nest of ``TensorSpec``; ``prev_action`` has the same spec.
        reward_spec: ``TensorSpec(())`` or ``TensorSpec((k,))`` for vector rewards.
        env_info_spec: dict of ``TensorSpec`` (``{}`` if None).
    """
    return TimeStep(
        step_type=BoundedTensorSpec((), StepType.dtype, StepType.FIRST, StepType.LAST),
        reward=reward_spec,
        discount=BoundedTensorSpec((), torch.float32, 0.0, 1.0),
        observation=observation_spec,
        prev_action=action_spec,
        env_id=TensorSpec((), torch.int32),
        env_info={} if env_info_spec is None else env_info_spec)


class ActorIdentity(NamedTuple):
    """Which actor an algorithm's copy is (``RLAlgorithm.actor_identity``; None on the learner).

    Attributes:
        index: ``0 .. num_actors - 1``.
        num_actors: how many actors there are.
    """

    index: int  # type: ignore[assignment]  # (shadows tuple.index, a method)
    num_actors: int
