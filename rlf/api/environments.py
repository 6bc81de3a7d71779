"""The ``env`` argument of ``rlf.train``: a gymnasium id, a ``gymnasium.Env`` subclass, or a
function that returns a ``gymnasium.Env``, as the ``load.env_name`` binding that makes it.

A class or function that its module defines at the top level is named ``module:Name``
(``rlf.environments.find_spec`` registers it), which every process imports: actor
processes, Ray actors and several learners make it too. One defined in ``__main__`` (a
script, a notebook) or inside a function is registered in this process only, under
``rlf-python/<Name>-v0``; a run that makes environments in other processes refuses it.
"""

from __future__ import annotations

import importlib
from typing import Any, Tuple

import gymnasium as gym

from rlf.utils.errors import UserError

__all__ = ["env_name_of", "check_portable"]

#: Where environments of this process alone are registered.
LOCAL_NAMESPACE = "rlf-python"


def _importable_name(maker: Any) -> str:
    """``module:Name`` of a class or function its module defines at the top level, else
    ``""``."""
    module, name = getattr(maker, "__module__", None), getattr(maker, "__qualname__", "")
    if not module or module == "__main__" or "." in name or "<" in name:
        return ""
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return ""
    return f"{module}:{name}" if found is maker else ""


def env_name_of(env: Any) -> Tuple[str, bool]:
    """``(load.env_name, portable)`` for ``env``; ``portable``: every process can make it.

    Args:
        env: a gymnasium id (``"CartPole-v1"``, ``"ALE/Pong-v5"``, ``"module:Env-v0"``), a
            ``gymnasium.Env`` subclass, or a function returning a ``gymnasium.Env``.

    Raises:
        UserError: for an environment instance (rlf makes one per environment the conf
            asks for) or anything else that is not one of the above.
    """
    if isinstance(env, str):
        if not env.strip():
            raise UserError("env='': give a gymnasium id (e.g. 'CartPole-v1'), a "
                            "gymnasium.Env subclass, or a function that returns one")
        return env, True
    if isinstance(env, gym.Env):
        raise UserError(f"env={type(env).__name__}(...) is an environment instance: rlf makes "
                        f"one per environment the conf asks for (load.num_envs); give the "
                        f"class, env={type(env).__name__}, or a function that returns one")
    if not callable(env):
        raise UserError(f"env={env!r}: give a gymnasium id, a gymnasium.Env subclass, or a "
                        f"function that returns one")
    name = _importable_name(env)
    if name:
        return name, True
    base = getattr(env, "__name__", type(env).__name__).strip("<>") or "env"
    env_id = f"{LOCAL_NAMESPACE}/{base}-v0"
    if env_id in gym.registry:
        del gym.registry[env_id]  # the latest definition (a notebook cell run again)
    gym.register(env_id, entry_point=env)
    return env_id, False


def check_portable(env: Any, portable: bool, config) -> None:
    """Refuses an environment of this process alone where the run makes environments in
    other processes (actor processes, Ray actors, several learners).

    Raises:
        UserError: naming the environment and the fix.
    """
    elsewhere = [what for what, used in (
        ("actor processes (TrainerConfig.async_unroll)", config.actors.async_unroll),
        ("Ray actors (TrainerConfig.use_ray)", config.actors.use_ray),
        ("several learners (TrainerConfig.num_learners)", config.run.num_learners > 1))
        if used]
    if not portable and elsewhere:
        name = getattr(env, "__qualname__", repr(env))
        raise UserError(f"env={name} is defined in __main__ or inside a function, so the "
                        f"{elsewhere[0]} of this run cannot import it; define it at the top "
                        f"of a module (my_pkg/envs.py) and pass it from there, or its id "
                        f"'my_pkg.envs:{name.split('.')[-1]}'")
