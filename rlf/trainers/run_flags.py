"""The short flags of a run (``--seed``, ``--env``, ``--steps``) as the gin bindings they stand
for: the command line and the Python API (``rlf.train(seed=, env=, steps=)``) add these
bindings after the conf's, so the run's ``config.gin`` records them like any other."""

from __future__ import annotations

from typing import List, Optional, Sequence

from rlf.utils.errors import UserError

__all__ = ["SHORT_FLAGS", "short_flag_bindings"]

#: Each short flag -> the settings it binds.
SHORT_FLAGS = {
    "seed": ("TrainerConfig.random_seed",),
    "env": ("load.env_name",),
    "steps": ("TrainerConfig.num_env_steps", "TrainerConfig.num_iterations"),
}


def _key(binding: str) -> str:
    """``Configurable.param`` of a binding (its scope and module path dropped)."""
    key = binding.split("=", 1)[0].strip().split("/")[-1]
    return ".".join(key.split(".")[-2:])


def short_flag_bindings(bindings: Sequence[str], seed: Optional[int] = None,
                        env: Optional[str] = None, steps: Optional[int] = None,
                        api: bool = False) -> List[str]:
    """The bindings of the short flags given (None: not given): ``--seed S`` is
    ``TrainerConfig.random_seed = S``; ``--env ID`` is ``load.env_name = 'ID'`` (a gymnasium
    id, ``ALE/<game>-v5``, or ``module:Env-v0``); ``--steps N`` is
    ``TrainerConfig.num_env_steps = N`` with ``num_iterations = 0`` (the agent steps bound
    the run alone).

    Args:
        bindings: the run's other bindings (``--conf_param``), checked against the flags.
        seed, env, steps: the flags' values.
        api: the values are ``rlf.train``'s arguments (``seed=``, ``bindings``), for the
            messages.

    Returns:
        The bindings, to add after ``bindings``.

    Raises:
        UserError: for a flag given with a ``--conf_param`` of a setting it binds (which one
            wins would be a guess), or an empty ``--env``.
    """
    given = {name: value for name, value in (("seed", seed), ("env", env), ("steps", steps))
             if value is not None}
    for name, value in given.items():
        flag = f"{name}={value!r}" if api else f"--{name} {value}"
        for binding in bindings:
            if _key(binding) in SHORT_FLAGS[name]:
                raise UserError(f"{flag} and {'the binding' if api else '--conf_param'} "
                                f"'{binding}' both set {_key(binding)}: give one of them")
    if env is not None and not str(env).strip():
        raise UserError(f"{'env=' if api else '--env'} is empty: give a gymnasium id (e.g. "
                        f"CartPole-v1, ALE/Breakout-v5, my_pkg.envs:MyEnv-v0)")
    out = []
    if seed is not None:
        out.append(f"TrainerConfig.random_seed = {int(seed)}")
    if env is not None:
        out.append(f"load.env_name = {str(env)!r}")
    if steps is not None:
        out += [f"TrainerConfig.num_env_steps = {int(steps)}", "TrainerConfig.num_iterations = 0"]
    return out
