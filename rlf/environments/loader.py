"""``load``: one entry point from an environment id to a batched TimeStep environment."""

from __future__ import annotations

import difflib
import importlib
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

#: How a user's environment is made known, for the message of an unknown id.
_REGISTER_HINT = ("an environment of your own: gymnasium.register('MyEnv-v0', "
                  "entry_point='my_pkg.envs:MyEnv') in my_pkg/envs.py, then the id "
                  "'my_pkg.envs:MyEnv-v0' (or the class itself, 'my_pkg.envs:MyEnv')")


def _user_spec(env_name: str) -> Optional[gym.envs.registration.EnvSpec]:
    """The registration that ``module:Env-v0`` (an id ``module`` registers when imported,
    gymnasium's form) or ``module:Class`` (a ``gymnasium.Env`` subclass or a function that
    returns one, registered here as ``module.Class-v0``) names; None for another form.

    Raises:
        UnknownEnvironmentError: if ``module`` cannot be imported.
    """
    module_name, _, name = env_name.partition(":")
    if not module_name or not name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownEnvironmentError(
            f"environment '{env_name}': cannot import {module_name} ({e}); is it installed, "
            f"or on PYTHONPATH?") from None
    if name in gym.registry:
        return gym.spec(name)
    maker = getattr(module, name, None)
    if callable(maker):
        env_id = f"{module_name}.{name}-v0"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{module_name}:{name}")
        return gym.spec(env_id)
    return None


def find_spec(env_name: str) -> gym.envs.registration.EnvSpec:
    """The gymnasium registration of ``env_name`` (ALE's ids included), without creating it.
    Besides registered ids, ``module:Env-v0`` imports ``module`` (which registers
    ``Env-v0``), and ``module:Class`` registers the class (or function) ``Class`` of
    ``module`` as ``module.Class-v0``: both work in every process that imports the module
    (actors, Ray).

    Raises:
        UnknownEnvironmentError: if no environment is registered under ``env_name`` (naming
            the closest registered ids and how to register one's own), or its module cannot
            be imported.
    """
    register_ale()
    bit_flipping.register()
    if ":" in env_name:
        spec = _user_spec(env_name)
        if spec is not None:
            return spec
    try:
        return gym.spec(env_name)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_name, list(gym.registry), n=5, cutoff=0.6)
        hint = f"closest registered ids: {close}" if close else "no registered id is close"
        raise UnknownEnvironmentError(f"Unknown environment id '{env_name}' ({e}); {hint}; "
                                      f"{_REGISTER_HINT}. `gymnasium.pprint_registry()` lists "
                                      f"the registered ids.") from None


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
        env_name: a registered gymnasium id, ``module:Env-v0`` or ``module:Class``
            (``find_spec``).
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
        return load_atari(spec.id, num_envs, seed=seed, **kwargs)
    return load_gym(spec.id, num_envs, seed=seed, **kwargs)


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
