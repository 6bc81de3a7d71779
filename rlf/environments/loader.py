"""``load``: one entry point from an environment id to a batched TimeStep environment."""

from __future__ import annotations

import difflib
from typing import Optional

import gin
import gymnasium as gym

from rlf.environments import bit_flipping
from rlf.environments.atari import ATARI_ENTRY_POINT, load_atari, register_ale
from rlf.environments.gym_env import load_gym
from rlf.environments.vector_environment import VectorEnvironment
from rlf.utils.errors import UserError

__all__ = ["load", "load_configured", "find_spec", "is_atari", "UnknownEnvironmentError"]


class UnknownEnvironmentError(UserError):
    """No environment is registered under the id given to ``load``."""

def find_spec(env_name: str) -> gym.envs.registration.EnvSpec:
    """The gymnasium registration of ``env_name`` (ALE's ids included), without creating it.

    Raises:
        UnknownEnvironmentError: if no environment is registered under ``env_name`` (naming
            the closest registered ids).
    """
    register_ale()
    bit_flipping.register()
    try:
        return gym.spec(env_name)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_name, list(gym.registry), n=5, cutoff=0.6)
        hint = f"closest registered ids: {close}" if close else "no registered id is close"
        raise UnknownEnvironmentError(f"Unknown environment id '{env_name}' ({e}); {hint}. "
                         f"`gymnasium.pprint_registry()` lists them all.") from None


def is_atari(env_name: str) -> bool:
    """Whether ``env_name`` is an ALE game (``ALE/Pong-v5``, ``PongNoFrameskip-v4``, ...):
    its registration's entry point is ale-py's.

    Raises:
        UnknownEnvironmentError: as ``find_spec``.
    """
    return find_spec(env_name).entry_point == ATARI_ENTRY_POINT


@gin.configurable
def load(env_name: str, num_envs: int, seed: Optional[int] = None,
         **kwargs) -> VectorEnvironment:
    """Creates a batched environment of ``num_envs`` copies of ``env_name``.

    Atari image ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4``, ...) go to ``load_atari``
    (ale-py's native ``AtariVectorEnv``); every other gymnasium id, and an Atari id with
    ``obs_type="ram"`` (or ``"grayscale"``) among ``kwargs``, goes to ``load_gym``
    (``gymnasium.make_vec``). ``kwargs`` are passed on to the one chosen; both are also
    gin-configurable (``load_atari.frame_stack = 1``).

    Args:
        env_name: a registered gymnasium id.
        num_envs: the batch size ``B``.
        seed: environment ``i`` is seeded with ``seed + i``; None for unseeded.

    Returns:
        A ``VectorEnvironment`` whose ``reset()``/``step()`` return ``TimeStep``s of
        ``[B, ...]`` tensors.

    Raises:
        UnknownEnvironmentError: (a ``UserError``, a ``ValueError``) if ``env_name`` is not
            registered, naming the closest registered ids.
        UserError: if ``num_envs < 1``.
    """
    if num_envs < 1:
        raise UserError(f"load('{env_name}'): num_envs must be >= 1, got {num_envs}")
    spec = find_spec(env_name)
    obs_type = kwargs.get("obs_type", spec.kwargs.get("obs_type", "rgb"))
    if spec.entry_point == ATARI_ENTRY_POINT and obs_type == "rgb":
        return load_atari(env_name, num_envs, seed=seed, **kwargs)
    return load_gym(env_name, num_envs, seed=seed, **kwargs)


def load_configured(**kwargs) -> VectorEnvironment:
    """``load(**kwargs)`` with its other arguments from gin (``load.env_name``, ...): the
    environment a conf configures.

    Raises:
        UserError: one line, where ``load`` or the environment's constructor is called without
            an argument it needs or with one it does not take (a ``TypeError``: gin's
            ``load`` without ``env_name``, a misspelt ``load.num_env``, which ``load`` passes
            on to the constructor); and as ``load``.
    """
    from rlf.utils.errors import one_line
    try:
        return load(**kwargs)
    except TypeError as e:
        if "required" in str(e):  # load() without its env_name or num_envs
            hint = "set `load.env_name` and `load.num_envs` in the gin file"
        else:  # e.g. an unknown keyword, which load passes on to gymnasium.make
            hint = ("keyword arguments of `load` and `load_gym` that they do not take "
                    "themselves go to the environment's constructor")
        raise UserError(f"cannot create the environment ({one_line(e)}); {hint}") from None
