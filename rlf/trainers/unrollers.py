"""``make_unroller``: the one place that chooses and builds a run's ``Unroller``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Optional

import gin

from rlf.environments import load
from rlf.trainers.actor_setup import ActorSetup
from rlf.unrollers import AsyncUnroller, SyncUnroller, Unroller
from rlf.utils.errors import UserError

__all__ = ["make_unroller"]


def make_unroller(config, env, algorithm, seed: int, root_dir: Path,
                  num_actors: Optional[int] = None, log_dir: Optional[Path] = None
                  ) -> Unroller:
    """The unroller ``config`` asks for.

    - ``SyncUnroller(env, algorithm)``: the learner steps ``env`` itself;
    - with ``async_unroll``: ``AsyncUnroller`` (actor processes) or, with ``use_ray``,
      ``RayUnroller``; each of ``num_actors`` actors builds an environment like ``env`` (gin's
      ``load``) and a copy of the algorithm from ``config.run.algorithm_ctor``, after an
      ``ActorSetup`` with the learner's gin configuration. Actor logs go to
      ``root_dir/actors/``. With ``deterministic`` the actors act with the fixed lag
      ``policy_lag``.

    Args:
        config: the ``TrainerConfig``.
        env: the learner's environment (its specs and batch size define the actors').
        algorithm: the learner's algorithm.
        seed: the run's seed (actor ``a``'s environment ``i`` gets ``seed + a * B + i``).
        root_dir: the run's directory.
        num_actors: the actors of this learner (``config.actors.num_actors / N`` with ``N``
            learners); None: ``config.actors.num_actors``.
        log_dir: where the actors' logs go; None: ``root_dir/actors``.

    Raises:
        UserError: for ``async_unroll`` with an on-policy algorithm.
        ImportError: for ``use_ray`` without Ray installed.
    """
    if not config.actors.async_unroll:
        return SyncUnroller(env, algorithm, device=config.run.device)
    if algorithm.on_policy:
        raise UserError(f"TrainerConfig.async_unroll needs an off-policy algorithm; "
                        f"{algorithm.name} is on-policy (it trains on each unroll of the "
                        f"learner's own environments as it comes); remove async_unroll, or "
                        f"train an off-policy algorithm with actors (IMPALA)")
    algorithm_ctor = functools.partial(
        config.run.algorithm_ctor, observation_spec=env.observation_spec(),
        action_spec=env.action_spec(), reward_spec=env.reward_spec())
    # Ray starts its workers at nice 15 by itself; processes get actor_niceness.
    setup = ActorSetup(gin.config_str(), num_threads=1, flush_denormal=config.run.flush_denormal,
                       niceness=0 if config.actors.use_ray else config.actors.actor_niceness,
                       deterministic=config.actors.deterministic)
    kwargs = dict(algorithm_ctor=algorithm_ctor, env_ctor=load,
                  num_actors=config.actors.num_actors if num_actors is None else num_actors,
                  num_envs_per_actor=env.batch_size,
                  unroll_length=int(config.data_path.unroll_length),
                  seed=seed, queue_size=config.actors.unroll_queue_size, setup=setup,
                  restart_failed_actors=config.actors.restart_failed_actors,
                  max_restarts=config.actors.max_actor_restarts,
                  restart_window=config.actors.actor_restart_window,
                  log_dir=str(Path(root_dir) / "actors" if log_dir is None else log_dir),
                  fixed_lag=config.actors.policy_lag if config.actors.deterministic else None)
    if config.actors.use_ray:
        from rlf.unrollers.ray_unroller import RayUnroller
        return RayUnroller(algorithm, address=config.actors.ray_address,
                           num_cpus_per_actor=config.actors.ray_num_cpus_per_actor,
                           resources_per_actor=config.actors.ray_actor_resources, **kwargs)
    return AsyncUnroller(algorithm, **kwargs)
