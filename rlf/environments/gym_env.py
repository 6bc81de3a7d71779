"""Any gymnasium environment through ``gymnasium.make_vec``."""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import operator
import warnings
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

import gin
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlf.environments.atari import register_ale
from rlf.environments.vector_environment import OBSERVATION_MISMATCH, VectorEnvironment
from rlf.utils.errors import UserError
from rlf.utils.extras import MissingExtraError

__all__ = ["load_gym"]

logger = logging.getLogger(__name__)


def _to_float32(observation: np.ndarray) -> np.ndarray:
    return observation.astype(np.float32)


def _box_as_float32(env: gym.Env) -> gym.Env:
    """``env`` (a ``Box`` observation space) with its observations cast to float32."""
    space: Any = env.observation_space  # a Box
    space32 = gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32),
                             space.shape, np.float32)
    # a module-level function, not a lambda: the environment stays picklable (get_state)
    return gym.wrappers.TransformObservation(env, _to_float32, space32)


_NESTED_OR_DISCRETE = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.Dict,
                       gym.spaces.Tuple)


def _flat_observations(env: gym.Env) -> gym.Env:
    """``env`` with its observations flattened by gymnasium's ``flatten`` (what its
    ``FlattenObservation`` does) into one float32 vector (``Discrete`` and ``MultiDiscrete``
    parts one-hot, ``Dict`` and ``Tuple`` parts concatenated, a ``Dict``'s in key order)."""
    space = env.observation_space
    # a partial of a module-level function, not FlattenObservation's lambda: the environment
    # stays picklable (get_state), so a resumed run continues the same episodes
    flat = gym.wrappers.TransformObservation(env, functools.partial(gym.spaces.flatten, space),
                                             gym.spaces.flatten_space(space))
    return _box_as_float32(flat)


def _masked_observations(env: gym.Env, indices: Sequence[int]) -> gym.Env:
    """``env`` with the entries ``indices`` of its flat ``Box`` observations removed
    (gymnasium's ``TransformObservation``): a partially observed task, e.g. CartPole without
    its velocities (indices 1 and 3).

    Raises:
        UserError: for an observation space that is not a rank-1 ``Box``, or indices that
            repeat, leave no entry, or lie outside it.
    """
    space = env.observation_space
    name = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
        raise UserError(f"load_gym.masked_observation_indices: {name}'s observations are "
                        f"{space}, not a flat Box (a vector) whose entries could be masked")
    n = space.shape[0]
    wrong = [i for i in indices if not 0 <= i < n]  # no negative index: [-1] is no entry
    normalised = sorted({i for i in indices if 0 <= i < n})
    if wrong or len(normalised) != len(indices) or len(normalised) == n:
        raise UserError(f"load_gym.masked_observation_indices = {list(indices)}: {name}'s "
                        f"observation has {n} entries; give distinct indices in [0, {n}) that "
                        f"leave at least one")
    keep = np.array([i for i in range(n) if i not in normalised])
    kept = gym.spaces.Box(space.low[keep], space.high[keep], dtype=space.dtype)
    # itemgetter, not a lambda: it pickles, so get_state captures the wrapped copies.
    return gym.wrappers.TransformObservation(env, operator.itemgetter(keep), kept)


def _to_channels_first(observation: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(observation, -1, 0))


def _channels_first(env: gym.Env) -> gym.Env:
    """``env`` with its ``(H, W, C)`` image observations as ``(C, H, W)``, the layout of
    rlf's image encoders (and of PyTorch's convolutions)."""
    space: Any = env.observation_space  # a Box
    moved = gym.spaces.Box(np.moveaxis(space.low, -1, 0), np.moveaxis(space.high, -1, 0),
                           dtype=space.dtype)
    return gym.wrappers.TransformObservation(env, _to_channels_first, moved)


def _is_channels_last_image(space: gym.Space) -> bool:
    """A uint8 ``Box`` of rank 3 with 1, 3 or 4 channels last and not first: gymnasium's
    layout for pixels (``(96, 96, 3)``)."""
    return (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8
            and len(space.shape) == 3 and space.shape[-1] in (1, 3, 4)
            and space.shape[0] not in (1, 3, 4))


def _channels_first_if_needed(env: gym.Env) -> gym.Env:
    """``_channels_first(env)`` for channels-last images, ``env`` itself otherwise."""
    return _channels_first(env) if _is_channels_last_image(env.observation_space) else env


def _flat_observations_if_needed(env: gym.Env) -> gym.Env:
    """``_flat_observations(env)`` for a ``Discrete``, ``MultiDiscrete``, ``Dict`` or ``Tuple``
    observation space, ``env`` itself otherwise."""
    if isinstance(env.observation_space, _NESTED_OR_DISCRETE):
        return _flat_observations(env)
    return env


def _float32_observations(env: gym.Env) -> gym.Env:
    """``env`` with float64 ``Box`` observations cast to float32 (others unchanged)."""
    space = env.observation_space
    if not (isinstance(space, gym.spaces.Box) and space.dtype == np.float64):
        return env
    return _box_as_float32(env)


def _observation_mismatch(observation, space: gym.Space) -> Optional[str]:
    """What in ``observation`` does not fit the structure and shapes of ``space`` (``Box``,
    ``Dict`` and ``Tuple``; other spaces are not checked), or None."""
    if isinstance(space, gym.spaces.Box):
        try:
            shape = np.shape(observation)
        except ValueError:  # nested sequences of different lengths
            return "no shape (a ragged sequence)"
        return None if shape == space.shape else f"shape {shape}"
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(observation, dict) or set(observation) != set(space.spaces):
            keys = sorted(observation) if isinstance(observation, dict) else None
            return f"keys {keys}" if keys is not None else f"a {type(observation).__name__}"
        parts: Dict[Any, Optional[str]] = {
            k: _observation_mismatch(observation[k], s) for k, s in space.spaces.items()}
    elif isinstance(space, gym.spaces.Tuple):
        if not isinstance(observation, tuple) or len(observation) != len(space.spaces):
            size = f" of {len(observation)}" if isinstance(observation, (tuple, list)) else ""
            return f"a {type(observation).__name__}{size}"
        parts = {i: _observation_mismatch(o, s) for i, (o, s) in
                 enumerate(zip(observation, space.spaces))}
    else:
        return None
    return next((f"[{k!r}]{'' if m.startswith('[') else ': '}{m}"
                 for k, m in parts.items() if m is not None), None)


class _CheckedObservations(gym.Wrapper):
    """Reports an observation that does not fit the observation space's structure and shapes
    in ``info[OBSERVATION_MISMATCH]`` (with a fitting stand-in observation), for
    ``VectorEnvironment`` to raise in the learner. In a subprocess of an async vector
    environment the observation would fail where it is written into shared memory, with
    gymnasium's log of the worker's traceback on stderr and no word of the cause."""

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        return self._checked(observation, info)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        observation, info = self._checked(observation, info)
        return observation, reward, terminated, truncated, info

    def _checked(self, observation, info):
        mismatch = _observation_mismatch(observation, self.observation_space)
        if mismatch is None:
            return observation, info
        message = (f"an observation of {mismatch} that does not fit its observation_space "
                   f"{self.observation_space}; check what its reset() and step() return")
        return self.observation_space.sample(), {**info, OBSERVATION_MISMATCH: message}


@contextlib.contextmanager
def _mujoco_warnings_logged(env_name: str) -> Iterator[None]:
    """While a MuJoCo environment is built, MuJoCo's warnings go to this module's logger
    (debug level) instead of straight to stderr, where MuJoCo's C library prints them: every
    model gymnasium's v5 assets compile draws one (MuJoCo 4 deprecates ``settotalmass``),
    which concerns gymnasium's files, not the run."""
    try:
        entry_point = gym.spec(env_name).entry_point
    except gym.error.Error:  # an unknown id: make_vec names it
        entry_point = None
    try:
        mujoco = (importlib.import_module("mujoco")
                  if isinstance(entry_point, str) and "mujoco" in entry_point else None)
    except ImportError:  # gymnasium then names the missing package
        mujoco = None
    if mujoco is None:
        yield
        return
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: logger.debug("MuJoCo: %s", message))
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


@gin.configurable
def load_gym(env_name: str,
             num_envs: int,
             seed: Optional[int] = None,
             vectorization_mode: str = "sync",
             wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
             max_episode_steps: Optional[int] = None,
             float32_observations: bool = True,
             flatten_observations: Optional[bool] = None,
             channels_first: Optional[bool] = None,
             masked_observation_indices: Optional[Sequence[int]] = None,
             normalize_observations: bool = False,
             **env_kwargs) -> VectorEnvironment:
    """Creates ``num_envs`` copies of a gymnasium environment as one batched environment.

    Args:
        env_name: a registered gymnasium id, e.g. ``"CartPole-v1"``.
        num_envs: number of copies ``B``.
        seed: copy ``i`` is seeded with ``seed + i`` at the first reset.
        vectorization_mode: ``"sync"`` (one process, for cheap environments), ``"async"``
            (one subprocess per copy, for expensive ones; each copy checks that its
            observations fit the observation space's structure and shapes) or
            ``"vector_entry_point"`` (the environment's own batched implementation, where it
            has one).
        wrappers: gymnasium wrappers applied to each copy, innermost first (sync/async only).
        max_episode_steps: overrides the id's ``TimeLimit`` (truncation after this many steps).
        float32_observations: cast float64 ``Box`` observations (MuJoCo's) to float32, the
            dtype of rlf's networks (sync/async only).
        flatten_observations: flatten observations into one float32 vector with gymnasium's
            ``FlattenObservation`` (``Discrete`` and ``MultiDiscrete`` one-hot, ``Dict`` and
            ``Tuple`` concatenated), which rlf's built-in networks take. None: only those
            four spaces (e.g. FrozenLake's and Taxi's states, Blackjack's tuple); False keeps
            them, for an ``encoder_ctor`` of one's own (sync/async only).
        channels_first: move the channels of image observations first, ``(H, W, C)`` ->
            ``(C, H, W)``, the layout of rlf's image encoders. None: only uint8 images with
            1, 3 or 4 channels last and not first (gymnasium's pixels, e.g. ``(96, 96, 3)``);
            True: any rank-3 ``Box``; False keeps them (sync/async only).
        masked_observation_indices: entries of a flat ``Box`` observation to remove, for a
            partially observed task (``[1, 3]``: CartPole's velocities, as sb3-contrib's
            ``CartPoleNoVel``); in training and in evaluation, which load the same way
            (sync/async only).
        normalize_observations: gymnasium's ``NormalizeObservation`` on each copy (after the
            masking): observations shifted and scaled by the running mean and variance of
            those the copy has seen. Each copy keeps its own statistics, and so does the
            evaluation environment, which starts from none: the policy is evaluated on
            observations standardised differently from those it was trained on (unlike
            Stable-Baselines3's ``VecNormalize``, which evaluates with the training
            statistics frozen). ``MLPEncoder.normalize_observations`` keeps one set of
            statistics in the networks instead, used alike in training and evaluation
            (sync/async only).
        **env_kwargs: passed to ``gymnasium.make`` for each copy.

    Raises:
        UserError: (a ``ValueError``) if the environment needs a package that is not
            installed (gymnasium's message says which), or for ``flatten_observations=True``
            or ``channels_first=True`` with ``vector_entry_point``.
        gymnasium.error.Error: if gymnasium cannot build it (e.g. wrappers with
            ``vector_entry_point``).
    """
    register_ale()  # ALE's ids, e.g. with obs_type="ram"
    if max_episode_steps is not None:
        env_kwargs["max_episode_steps"] = max_episode_steps
    for name, value in (("flatten_observations", flatten_observations),
                        ("channels_first", channels_first)):
        if value and vectorization_mode not in ("sync", "async"):
            raise UserError(f"load_gym: {name} = True wraps each copy, which "
                            f"vectorization_mode = {vectorization_mode!r} does not make; use "
                            f"'sync' or 'async'")
    if normalize_observations and vectorization_mode not in ("sync", "async"):
        raise UserError(f"load_gym: normalize_observations wraps each copy, which "
                        f"vectorization_mode = {vectorization_mode!r} does not make; use "
                        f"'sync' or 'async'")
    if masked_observation_indices and vectorization_mode not in ("sync", "async"):
        raise UserError(f"load_gym: masked_observation_indices wraps each copy, which "
                        f"vectorization_mode = {vectorization_mode!r} does not make; use "
                        f"'sync' or 'async'")
    if vectorization_mode in ("sync", "async"):
        if masked_observation_indices:
            wrappers = [*wrappers, functools.partial(_masked_observations,
                                                     indices=list(masked_observation_indices))]
        if normalize_observations:
            warnings.warn("load_gym.normalize_observations keeps statistics per environment "
                          "copy, and an evaluation environment starts from none; "
                          "MLPEncoder.normalize_observations = True keeps one set in the "
                          "networks, used alike in training and evaluation", stacklevel=2)
            wrappers = [*wrappers, gym.wrappers.NormalizeObservation]
        if channels_first is None:
            wrappers = [*wrappers, _channels_first_if_needed]
        elif channels_first:
            wrappers = [*wrappers, _channels_first]
        if flatten_observations is None:
            wrappers = [*wrappers, _flat_observations_if_needed]
        elif flatten_observations:
            wrappers = [*wrappers, _flat_observations]
        if float32_observations:
            wrappers = [*wrappers, _float32_observations]
    if vectorization_mode == "async":
        wrappers = [*wrappers, _CheckedObservations]
    vector_kwargs = ({"autoreset_mode": AutoresetMode.NEXT_STEP}
                     if vectorization_mode in ("sync", "async") else None)
    try:
        with _mujoco_warnings_logged(env_name):
            env = gym.make_vec(env_name, num_envs=num_envs,
                               vectorization_mode=vectorization_mode,
                               vector_kwargs=vector_kwargs, wrappers=list(wrappers),  # type: ignore[arg-type]
                               **env_kwargs)
    except gym.error.DependencyNotInstalled as e:  # e.g. Box2D for LunarLander
        extra = " (with rlf: pip install -e '.[mujoco]')" if "mujoco" in str(e).lower() else ""
        raise MissingExtraError(f"{env_name}: {e}{extra}") from None
    return VectorEnvironment(env, seed=seed, name=env_name)
