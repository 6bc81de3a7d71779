"""RayUnroller: the ``AsyncUnroller`` interface with Ray actors, which may run on other machines.

``pip install -e ".[ray]"``. Each Ray actor builds its own environment and algorithm copy (as an
``AsyncUnroller`` process does) and answers ``unroll(params, version)`` calls with a
``[T, B]`` unroll. Parameters are broadcast through Ray's object store: ``update_parameters``
puts one copy there and every actor fetches it with its next call. Up to ``queue_size`` calls
per actor are in flight, so actors keep stepping while the learner trains; the learner takes
one unroll from every actor per iteration, so everything downstream matches ``SyncUnroller``.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from rlf.unrollers.actor_failures import ActorError, RestartPolicy, append_to_log
from rlf.unrollers.async_unroller import (_shared_state, build_actor, combine_unrolls,
                                          copy_parameters)
from rlf.unrollers.sync_unroller import SyncUnroller
from rlf.utils.common import detach

__all__ = ["RayUnroller"]


class _RayActor:
    """The body of one Ray actor (wrapped with ``ray.remote`` by ``RayUnroller``)."""

    def __init__(self, index, algorithm_ctor, env_ctor, gin_config, num_envs, seed,
                 unroll_length, num_threads, flush_denormal):
        self._env, self._algorithm, self._params = build_actor(
            algorithm_ctor, env_ctor, gin_config, num_envs, seed, num_threads, flush_denormal)
        self._unroller = SyncUnroller(self._env, self._algorithm)
        self._unroll_length = unroll_length
        self._version = -1

    def unroll(self, params: Dict[str, torch.Tensor], version: int):
        """Copies ``params`` in if ``version`` is new, then unrolls ``unroll_length`` steps.

        Returns:
            ``(version, [T, B] Experience, {"env_step", "policy"} seconds)``.
        """
        if version != self._version:
            copy_parameters(self._params, params)
            self._version = version
        with torch.no_grad():
            experience = detach(self._unroller.unroll(self._unroll_length))
        return version, experience, dict(self._unroller.times)

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    def close(self) -> None:
        """Closes the actor's environments."""
        self._env.close()


class RayUnroller:
    """Collects experience from ``num_actors`` Ray actors.

    Args:
        algorithm, algorithm_ctor, env_ctor, num_actors, num_envs_per_actor, unroll_length,
        seed, gin_config, num_threads, restart_failed_actors, max_restarts, restart_window,
        flush_denormal: see ``AsyncUnroller``.
        log_dir: the learner appends what it learns of each actor's failure (Ray's error,
            with the actor's traceback) to ``log_dir/actor-<index>.log``; the actors' own
            output goes where Ray sends it (the driver's terminal, Ray's session logs).
        queue_size: unroll calls in flight per actor (at least 1).
        address: the Ray cluster (``ray.init(address=...)``); None starts a local Ray with as
            many CPUs as this machine has (at least ``num_actors``) unless Ray is already
            initialised.
        num_cpus_per_actor: Ray CPU resources each actor reserves.
        timeout: seconds to wait for an unroll before raising ``ActorError``.

    Raises:
        ImportError: if Ray is not installed (``pip install -e ".[ray]"``).
    """

    def __init__(self, algorithm, algorithm_ctor: Callable[[], Any], env_ctor: Callable[..., Any],
                 num_actors: int, num_envs_per_actor: int, unroll_length: int,
                 seed: Optional[int] = None, queue_size: int = 1, gin_config: str = "",
                 num_threads: int = 1, restart_failed_actors: bool = False,
                 address: Optional[str] = None, num_cpus_per_actor: float = 1.0,
                 timeout: float = 600.0, flush_denormal: bool = True, max_restarts: int = 3,
                 restart_window: float = 600.0, log_dir: Optional[str] = None):
        try:
            import ray
        except ImportError as e:
            raise ImportError("RayUnroller needs Ray: pip install -e '.[ray]'") from e
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, include_dashboard=False, log_to_driver=True,
                     num_cpus=None if address else max(os.cpu_count() or 1, num_actors))
        self._algorithm = algorithm
        self._num_actors, self._num_envs = num_actors, num_envs_per_actor
        self._unroll_length = unroll_length
        self._in_flight = max(1, queue_size)
        self._restarts = RestartPolicy(restart_failed_actors, max_restarts, restart_window)
        self._log_dir = None if log_dir is None else Path(log_dir)
        self._timeout = timeout
        self._remote_cls = ray.remote(num_cpus=num_cpus_per_actor)(_RayActor)
        self._actor_args = (algorithm_ctor, env_ctor, gin_config, num_envs_per_actor, seed,
                            unroll_length, num_threads, flush_denormal)
        self._version = 0
        self._params_ref = ray.put({k: v.detach().cpu().clone()
                                    for k, v in _shared_state(algorithm).items()})
        self._actors: List[Any] = [self._make_actor(a) for a in range(num_actors)]
        self._calls: List[collections.deque] = [collections.deque() for _ in range(num_actors)]
        for a in range(num_actors):
            self._fill(a)
        self.times: Dict[str, float] = {"env_step": 0.0, "policy": 0.0, "wait": 0.0}
        self.policy_lag = 0.0

    @property
    def restarts(self) -> int:
        """Actor restarts so far."""
        return self._restarts.total

    def log_file(self, index: int) -> Optional[Path]:
        """Where actor ``index``'s failures are logged (``log_dir/actor-<index>.log``), or
        None."""
        return None if self._log_dir is None else self._log_dir / f"actor-{index}.log"

    def _make_actor(self, index: int):
        algorithm_ctor, env_ctor, gin_config, n, seed, t, threads, flush = self._actor_args
        actor_seed = None if seed is None else seed + index * n
        return self._remote_cls.remote(index, algorithm_ctor, env_ctor, gin_config, n,
                                       actor_seed, t, threads, flush)

    def _fill(self, index: int) -> None:
        while len(self._calls[index]) < self._in_flight:
            self._calls[index].append(
                self._actors[index].unroll.remote(self._params_ref, self._version))

    @property
    def batch_size(self) -> int:
        """Environments over all actors."""
        return self._num_actors * self._num_envs

    def actor_pids(self) -> List[int]:
        """Process ids of the actors (on their machines)."""
        return self._ray.get([a.pid.remote() for a in self._actors])

    def _result(self, index: int):
        """The next unroll of actor ``index``, keeping ``queue_size`` calls in flight."""
        ray = self._ray
        while True:
            ref = self._calls[index].popleft()
            try:
                result = ray.get(ref, timeout=self._timeout)
            except (ray.exceptions.RayError, TimeoutError) as e:
                text = str(e).strip() or type(e).__name__
                log = self.log_file(index)
                append_to_log(log, f"[learner pid {os.getpid()}] {type(e).__name__}: {text}")
                first = text.splitlines()[0] if log is not None else text
                cause = (f"sent no unroll for {self._timeout:.0f} s" if isinstance(
                    e, (TimeoutError, ray.exceptions.GetTimeoutError))
                    else f"{type(e).__name__}: {first}")
                self._restarts.restart_or_raise(index, cause, log, self.close, "Ray actor")
                try:
                    ray.kill(self._actors[index], no_restart=True)
                except Exception:  # already gone
                    pass
                self._actors[index] = self._make_actor(index)
                self._calls[index].clear()
                self._fill(index)
                continue
            self._fill(index)
            return result

    def unroll(self, unroll_length: int):
        """One ``[T, num_actors * B]`` unroll: the next unroll of every actor.

        Raises:
            ActorError: if an actor failed and restarts are off.
            ValueError: for an ``unroll_length`` other than the actors'.
        """
        if unroll_length == 0:
            return None
        if unroll_length != self._unroll_length:
            raise ValueError(f"RayUnroller: actors unroll {self._unroll_length} steps, asked "
                             f"for {unroll_length}")
        t0 = time.perf_counter()
        results = [self._result(a) for a in range(self._num_actors)]
        wait = time.perf_counter() - t0
        experience, times, self.policy_lag = combine_unrolls(results, self._num_envs,
                                                             self._version)
        self.times = dict(times, wait=wait)
        return experience

    def update_parameters(self) -> None:
        """Puts the learner's parameters into the object store; actors fetch them with their
        next call."""
        self._params_ref = self._ray.put({k: v.detach().cpu().clone()
                                          for k, v in _shared_state(self._algorithm).items()})
        self._version += 1

    def state_dict(self) -> Dict[str, Any]:
        """Nothing to restore: actors restart their episodes after a resume."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> bool:
        """Returns False: the environments cannot be restored (see ``state_dict``)."""
        return False

    def close(self) -> None:
        """Kills the actors (and shuts down the Ray this unroller started)."""
        for a in getattr(self, "_actors", []):
            try:
                self._ray.kill(a, no_restart=True)
            except Exception:
                pass
        self._actors = []
        if getattr(self, "_owns_ray", False) and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_ray = False
