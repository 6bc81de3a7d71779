"""VectorEnvironment: a gymnasium VectorEnv presented as a batched TimeStep environment."""

from __future__ import annotations

from typing import Any, Dict, Optional

import os
import pickle
import traceback

import gymnasium as gym
import numpy as np
import optree
import torch
from gymnasium.vector import AutoresetMode

from rlf import nest
from rlf.data_structures import RAW_REWARD, StepType, TimeStep, time_step_spec
from rlf.environments.spec_utils import spec_from_space
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec, validate_nest
from rlf.utils.errors import UserError

__all__ = ["VectorEnvironment", "OBSERVATION_MISMATCH"]

#: The ``info`` key in which a copy reports an observation that does not fit its space (a
#: message), where it cannot raise itself (a subprocess of an async vector environment).
OBSERVATION_MISMATCH = "rlf_observation_mismatch"

# Where gymnasium stacks the copies' observations into one batch.
_GYM_VECTOR_UTILS = os.path.dirname(gym.vector.utils.__file__)


def _float32_if_float64(spec: TensorSpec) -> TensorSpec:
    """A float64 spec as float32 (same bounds), any other spec as it is."""
    if spec.dtype != torch.float64:
        return spec
    if isinstance(spec, BoundedTensorSpec):
        return BoundedTensorSpec(spec.shape, torch.float32, spec.minimum, spec.maximum)
    return TensorSpec(spec.shape, torch.float32)


class VectorEnvironment:
    """Wraps a gymnasium ``VectorEnv`` (``NEXT_STEP`` autoreset) to yield ``TimeStep``s.

    gymnasium's ``NEXT_STEP`` autoreset already matches rlf's episode semantics
    (docs/design.md, "Data conventions"): after an episode ends, the next ``step`` ignores its
    action and returns the reset observation with reward 0. This class labels the steps:

    - the step after a ``terminated`` or ``truncated`` one -> ``FIRST`` (reward 0,
      discount 1, ``prev_action`` zeros);
    - ``terminated`` -> ``LAST`` with discount 0 (also if ``truncated`` at the same step);
    - ``truncated`` only -> ``LAST`` with discount 1 (the value of the final observation
      still counts);
    - otherwise ``MID`` with discount 1.

    Observations are converted with ``torch.from_numpy`` (no copy; the vector envs used here
    return fresh arrays each step) and keep their dtype (uint8 frames stay uint8).

    Args:
        env: a gymnasium VectorEnv whose ``metadata["autoreset_mode"]`` is ``NEXT_STEP`` and
            whose ``batch_size`` equals ``num_envs`` (synchronous stepping).
        seed: seeds the sub-environments ``seed, seed + 1, ...`` at the first ``reset()``;
            None leaves them unseeded.
        env_info_spec: dict ``{key: TensorSpec(())}`` of ``info`` entries to pass on in
            ``TimeStep.env_info`` as ``[B]`` tensors (e.g. Atari ``{"lives": int32}``).
        name: a name for messages (usually the environment id).
        reward_clipping: clip the training reward to ``[-1, 1]`` (Atari's convention) and keep
            the unclipped one in ``env_info["raw_reward"]`` (float32, 0 at FIRST), from which
            ``AverageEpisodeScore`` sums the game's own score.

    Raises:
        ValueError: if the VectorEnv autoresets in another mode, or ``seed`` is not None or
            an integer >= 0.
    """

    def __init__(self, env: gym.vector.VectorEnv, seed: Optional[int] = None,
                 env_info_spec: Optional[Dict[str, TensorSpec]] = None, name: str = "",
                 reward_clipping: bool = False):
        mode = env.metadata.get("autoreset_mode")
        if mode is not None and AutoresetMode(mode) != AutoresetMode.NEXT_STEP:
            raise ValueError(f"VectorEnvironment({name}): the vector env autoresets in mode "
                             f"{mode}; create it with autoreset_mode=AutoresetMode.NEXT_STEP")
        batch_size = getattr(env, "batch_size", env.num_envs)
        if batch_size != env.num_envs:
            raise ValueError(f"VectorEnvironment({name}): batch_size {batch_size} != "
                             f"num_envs {env.num_envs}; only synchronous stepping is supported")
        self._env = env
        self._name = name or str(getattr(env.spec, "id", type(env).__name__))
        if seed is not None and (isinstance(seed, bool) or int(seed) != seed or seed < 0):
            raise ValueError(f"VectorEnvironment({self._name}): seed must be an integer >= 0 "
                             f"or None, got {seed!r}")
        self._seed = None if seed is None else int(seed)
        self._num_envs = int(env.num_envs)
        self._observation_spec = spec_from_space(env.single_observation_space)
        # Only floating-point observations can hold a NaN (uint8 frames are not checked).
        self._float_observations = any(s.dtype.is_floating_point
                                       for s in optree.tree_leaves(self._observation_spec))
        # rlf's networks act in float32: a float64 Box's actions are cast back for the env.
        space_action_spec = spec_from_space(env.single_action_space)
        self._action_spec = nest.map_structure(_float32_if_float64, space_action_spec)
        self._action_casts = [
            None if s.dtype == t.dtype else torch.empty((), dtype=s.dtype).numpy().dtype
            for s, t in zip(optree.tree_leaves(space_action_spec),
                            optree.tree_leaves(self._action_spec))]
        self._reward_spec = TensorSpec((), torch.float32)
        action_leaves, self._action_treespec = optree.tree_flatten(self._action_spec)
        self._action_layout = [(torch.Size((self._num_envs, *s.shape)), s.dtype)
                               for s in action_leaves]
        self._env_info_spec = dict(env_info_spec or {})
        self._reward_clipping = bool(reward_clipping)
        if self._reward_clipping:
            self._env_info_spec[RAW_REWARD] = TensorSpec((), torch.float32)
        self._time_step_spec = time_step_spec(self._observation_spec, self._action_spec,
                                              self._reward_spec, self._env_info_spec)
        self._env_ids = np.arange(self._num_envs, dtype=np.int32)
        self._env_id_tensor = torch.from_numpy(self._env_ids)
        self._done: Optional[np.ndarray] = None  # [B] bool: the episode ended last step

    # ----------------------------------------------------------------- specs
    @property
    def batch_size(self) -> int:
        """Number of parallel environments ``B``."""
        return self._num_envs

    @property
    def name(self) -> str:
        """The environment id."""
        return self._name

    @property
    def gym_env(self) -> gym.vector.VectorEnv:
        """The wrapped gymnasium VectorEnv."""
        return self._env

    def observation_spec(self) -> Any:
        """Nest of ``TensorSpec`` of one observation."""
        return self._observation_spec

    def action_spec(self) -> Any:
        """Nest of ``BoundedTensorSpec`` of one action (float32 for a float64 Box, whose
        actions ``step`` casts back to float64)."""
        return self._action_spec

    def reward_spec(self) -> TensorSpec:
        """``TensorSpec(())`` float32."""
        return self._reward_spec

    def env_info_spec(self) -> Dict[str, TensorSpec]:
        """Dict of specs of ``TimeStep.env_info``."""
        return self._env_info_spec

    def time_step_spec(self) -> TimeStep:
        """``TimeStep`` of specs of one step (no batch dim)."""
        return self._time_step_spec

    # ----------------------------------------------------------------- stepping
    def reset(self) -> TimeStep:
        """Resets every environment and returns ``[B]`` FIRST time steps.

        The first call seeds the environments with ``seed`` (if given); later calls continue
        their random streams.

        Raises:
            UserError: if a floating-point observation holds a NaN or an infinity, or the
                copies' observations do not fit the declared observation space.
        """
        seed, self._seed = self._seed, None
        try:
            obs, info = self._env.reset(seed=seed)
        except ValueError as e:
            raise (self._batching_error(e) or e) from e
        obs, info = self._in_env_order(info, obs)
        self._raise_reported_mismatch(info)
        self._check_finite(None, obs)
        self._done = np.zeros(self._num_envs, dtype=bool)
        zeros = np.zeros(self._num_envs, dtype=np.float32)
        prev_action = nest.map_structure(lambda s: s.zeros((self._num_envs,)),
                                         self._action_spec)
        return self._time_step(np.full(self._num_envs, StepType.FIRST, np.int32), zeros,
                               np.ones(self._num_envs, np.float32), obs, prev_action, info)

    def step(self, action: Any) -> TimeStep:
        """Steps every environment with ``action`` and returns the ``[B]`` time steps.

        Args:
            action: nest of tensors matching ``action_spec()`` with outer dim ``[B]``
                (e.g. ``[B]`` int64 for a Discrete action space), on any device; the time
                step returned (``prev_action`` included) is on CPU. The action of an
                environment whose last step was LAST is ignored (it resets instead).

        Raises:
            ValueError: if the action's structure, shape or dtype differs from the spec (the
                message states the expected spec).
            RuntimeError: if called before ``reset()``.
            UserError: if the environment returns a NaN or infinite reward or floating-point
                observation (naming the environment, the copy and the observation's path),
                or observations that do not fit its declared observation space (found where
                gymnasium batches them, or reported by a subprocess of ``load_gym``'s
                async mode in ``info[OBSERVATION_MISMATCH]``).
        """
        if self._done is None:
            raise RuntimeError(f"{self._name}: call reset() before step()")
        leaves, treespec = optree.tree_flatten(action)
        if treespec != self._action_treespec or not all(
                isinstance(x, torch.Tensor) and x.shape == shape and x.dtype == dtype
                for x, (shape, dtype) in zip(leaves, self._action_layout)):
            validate_nest(action, self._action_spec, (self._num_envs,),
                          f"{self._name} action")  # raises, naming the path
        leaves = [x.detach().cpu() for x in leaves]  # detached, on CPU: a learner's may be on CUDA
        np_leaves = [x.numpy() if cast is None else x.numpy().astype(cast)
                     for x, cast in zip(leaves, self._action_casts)]
        np_action = np_leaves[0] if treespec.is_leaf() else treespec.unflatten(np_leaves)
        try:
            obs, reward, terminated, truncated, info = self._env.step(np_action)
        except ValueError as e:
            raise (self._batching_error(e) or e) from e
        obs, reward, terminated, truncated, info = self._in_env_order(
            info, obs, reward, terminated, truncated)
        self._raise_reported_mismatch(info)
        first = self._done
        terminated = np.asarray(terminated, dtype=bool) & ~first
        last = (np.asarray(truncated, dtype=bool) & ~first) | terminated
        # MID (1) + 1 at LAST (2) - 1 at FIRST (0); first and last never overlap.
        step_type = last.astype(np.int32) - first.astype(np.int32) + StepType.MID
        discount = (~terminated).astype(np.float32)
        reward = np.asarray(reward, dtype=np.float32)
        self._check_finite(reward, obs)
        if first.any():
            reward = np.where(first.reshape((-1,) + (1,) * (reward.ndim - 1)), 0.0,
                              reward).astype(np.float32)
            keep = torch.from_numpy(~first)
            prev_action = treespec.unflatten([
                x * keep.view((-1,) + (1,) * (x.ndim - 1)).to(x.dtype) for x in leaves])
        else:
            prev_action = treespec.unflatten([x.clone() for x in leaves])
        self._done = last
        return self._time_step(step_type, reward, discount, obs, prev_action, info)

    # ----------------------------------------------------------------- state
    def get_state(self) -> Optional[bytes]:
        """The complete state of the environments as bytes, or None if it cannot be captured.

        Only in-process ``SyncVectorEnv``s of picklable environments (gymnasium's classic
        control, Box2D, MuJoCo, ...) can be captured; async vector envs (subprocesses) and
        ``AtariVectorEnv`` (native threads) return None. With the state, a resumed run steps
        the same episodes as an uninterrupted one.
        """
        if type(self._env) is not gym.vector.SyncVectorEnv or self._done is None:
            return None
        try:
            env_state = {k: v for k, v in vars(self._env).items() if k != "env_fns"}
            return pickle.dumps((env_state, self._done, self._seed))
        except Exception:  # an environment holding unpicklable resources
            return None

    def set_state(self, state: bytes) -> None:
        """Restores a state returned by ``get_state`` (from the same environment id).

        Raises:
            ValueError: if the state does not fit this environment.
        """
        env_state, done, seed = pickle.loads(state)
        if type(self._env) is not gym.vector.SyncVectorEnv or len(done) != self._num_envs:
            raise ValueError(f"{self._name}.set_state: the saved state is of {len(done)} "
                             f"environments in a SyncVectorEnv, this is {self._num_envs} in "
                             f"a {type(self._env).__name__}")
        for env in self._env.envs:
            env.close()
        vars(self._env).update(env_state)
        self._done, self._seed = done, seed

    def close(self) -> None:
        """Closes the underlying environments (and their subprocesses)."""
        self._env.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ----------------------------------------------------------------- helpers
    def _raise_reported_mismatch(self, info) -> None:
        """Raises ``UserError`` naming the environment and the copy if a copy reported an
        observation that does not fit its space (``info[OBSERVATION_MISMATCH]``)."""
        if not isinstance(info, dict) or OBSERVATION_MISMATCH not in info:
            return
        messages = np.asarray(info[OBSERVATION_MISMATCH], dtype=object).reshape(-1)
        reported = info.get("_" + OBSERVATION_MISMATCH, np.ones(len(messages), bool))
        copy = int(np.flatnonzero(reported)[0])
        raise UserError(f"environment {self._name} returned in its copy {copy} "
                        f"{messages[copy]}")

    def _batching_error(self, error: ValueError) -> Optional[UserError]:
        """A ``UserError`` naming the environment if ``error`` arose where gymnasium stacks
        the copies' observations into one batch (an observation that does not fit the
        declared ``observation_space``), else None."""
        frames = traceback.extract_tb(error.__traceback__)
        if not any(f.filename.startswith(_GYM_VECTOR_UTILS) for f in frames):
            return None
        space = self._env.single_observation_space
        return UserError(f"environment {self._name}: gymnasium could not batch the "
                         f"observations of its copies ({error}): each must fit the declared "
                         f"observation_space {space}; check what its reset() and step() "
                         f"return")

    def _check_finite(self, reward: Optional[np.ndarray], obs) -> None:
        """Raises ``UserError`` naming the environment if ``reward`` or a floating-point
        observation holds a NaN or an infinity: learning from one turns every weight into
        NaN, and the loss that shows it blames the learning rate."""
        if reward is not None and not np.isfinite(reward).all():
            bad = np.flatnonzero(~np.isfinite(reward))
            raise UserError(f"environment {self._name} returned the reward "
                            f"{reward[bad[0]]} in its copy {bad[0]}; rlf needs finite rewards: "
                            f"fix the environment or wrap it (gymnasium.wrappers."
                            f"TransformReward)")
        if not self._float_observations or (isinstance(obs, np.ndarray)
                                            and np.isfinite(obs).all()):
            return
        paths, leaves, _ = optree.tree_flatten_with_path(obs)
        for path, leaf in zip(paths, leaves):
            leaf = np.asarray(leaf)
            if leaf.dtype.kind == "f" and not np.isfinite(leaf).all():
                index = tuple(np.argwhere(~np.isfinite(leaf))[0])
                name = "".join(f"[{p!r}]" for p in path)
                raise UserError(f"environment {self._name} returned the observation{name} "
                                f"element {leaf[index]} in its copy {index[0]}; rlf needs "
                                f"finite observations: fix the environment or wrap it "
                                f"(gymnasium.wrappers.TransformObservation)")

    def _in_env_order(self, info, *arrays):
        """Returns ``(*arrays, info)`` with rows sorted by ``info["env_id"]`` if it is present.

        Synchronous vector envs answer in env order already; this guards the assumption.
        """
        env_id = info.get("env_id") if isinstance(info, dict) else None
        if env_id is None or not (env_id != self._env_ids).any():
            return arrays + (info,)
        order = np.argsort(env_id, kind="stable")
        arrays = tuple(nest.map_structure(lambda x: x[order], a) for a in arrays)
        info = {k: (v[order] if isinstance(v, np.ndarray) and v.shape[:1] == order.shape
                    else v) for k, v in info.items()}
        return arrays + (info,)

    def _time_step(self, step_type, reward, discount, obs, prev_action, info) -> TimeStep:
        env_info = {k: torch.from_numpy(np.asarray(info[k])).to(spec.dtype)
                    for k, spec in self._env_info_spec.items() if k != RAW_REWARD}
        if self._reward_clipping:
            env_info[RAW_REWARD] = torch.from_numpy(reward.copy())
            reward = np.clip(reward, -1.0, 1.0)
        return TimeStep(
            step_type=torch.from_numpy(step_type),
            reward=torch.from_numpy(reward),
            discount=torch.from_numpy(discount),
            observation=nest.map_structure(torch.from_numpy, obs),
            prev_action=prev_action,
            env_id=self._env_id_tensor.clone(),
            env_info=env_info)
