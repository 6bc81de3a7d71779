"""RayUnroller: the ``ActorUnroller`` transport over Ray actors, which may run on other machines.

``pip install -e ".[ray]"``. Each Ray actor builds its own environment and algorithm copy (as an
``AsyncUnroller`` process does) and answers ``unroll(params, version)`` calls with a
``[T, B]`` unroll. Parameters are broadcast through Ray's object store: ``update_parameters``
puts one copy there and every actor fetches it with its next call. Up to ``queue_size`` calls
per actor are in flight, so actors keep stepping while the learner trains. With a fixed lag
``L``, unroll ``k`` is submitted with version ``k - L``'s object: the first ``L + 1`` unrolls
at once with version 0, then one more per actor as each version is published (a Ray actor
runs one caller's calls in order).
"""

from __future__ import annotations

import collections
import os
from typing import Any, Callable, Dict, List, Optional

import torch

from rlf.unrollers.actor_failures import append_to_log
from rlf.unrollers.actor_params import actor_state_dict
from rlf.unrollers.actor_unroller import (ActorUnroller, actor_torch_seed, build_actor,
                                          copy_parameters)
from rlf.unrollers.sync_unroller import SyncUnroller
from rlf.utils.common import detach
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError, one_line
from rlf.utils.extras import require
from rlf.utils.ray_address import init_ray

__all__ = ["RayUnroller"]


class _RayActor:
    """The body of one Ray actor (wrapped with ``ray.remote`` by ``RayUnroller``)."""

    def __init__(self, algorithm_ctor, env_ctor, setup, num_envs, seed, unroll_length,
                 index=0, num_actors=1, torch_seed=None):
        self._env, self._algorithm, self._params = build_actor(
            algorithm_ctor, env_ctor, num_envs, seed, setup, index, num_actors, torch_seed)
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

    def node_id(self) -> str:
        """The id of the Ray node the actor runs on."""
        import ray
        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        """Closes the actor's environments."""
        self._env.close()


class RayUnroller(ActorUnroller):
    """Collects experience from ``num_actors`` Ray actors.

    Args:
        algorithm, algorithm_ctor, env_ctor, num_actors, num_envs_per_actor, unroll_length,
        seed, setup, restart_failed_actors, max_restarts, restart_window: see
            ``AsyncUnroller``.
        queue_size: unroll calls in flight per actor (at least 1).
        log_dir: the learner appends what it learns of each actor's failure (Ray's error,
            with the actor's traceback) to ``log_dir/actor-<index>.log``; the actors' own
            output goes where Ray sends it (the driver's terminal, Ray's session logs).
        address: the Ray cluster (``ray.init(address=...)``); None joins the cluster that
            the ``RAY_ADDRESS`` environment variable names (``ray job submit`` sets it), else
            starts a local Ray of its own with as many CPUs as this machine has (at least
            ``num_actors``), even where ``ray start`` left a cluster running (``'auto'``
            joins that one). Ray already initialised in this process is used as it is.
        num_cpus_per_actor: Ray CPU resources each actor reserves.
        resources_per_actor: custom Ray resources each actor reserves (``{"rlf_actor": 1}``),
            which places the actors on the nodes that offer them.
        timeout: seconds to wait for an unroll before the actor counts as failed.
        fixed_lag: act unroll ``k`` with parameter version ``k - fixed_lag``
            (``ActorUnroller``); None: free-running.

    Raises:
        MissingExtraError: (an ``ImportError`` and a ``UserError``) if Ray is not installed
            (``pip install -e ".[ray]"``).
        UserError: (a ``ValueError``) if no Ray cluster answers at ``address``.
    """

    _actor_kind = "Ray actor"

    def __init__(self, algorithm, algorithm_ctor: Callable[[], Any], env_ctor: Callable[..., Any],
                 num_actors: int, num_envs_per_actor: int, unroll_length: int,
                 seed: Optional[int] = None, queue_size: int = 1,
                 setup: Optional[Callable[[], None]] = None,
                 restart_failed_actors: bool = False, max_restarts: int = 3,
                 restart_window: float = 600.0, log_dir: Optional[str] = None,
                 address: Optional[str] = None, num_cpus_per_actor: float = 1.0,
                 resources_per_actor: Optional[Dict[str, float]] = None,
                 timeout: float = 600.0, fixed_lag: Optional[int] = None):
        ray = require("ray", "ray", "Ray actors (TrainerConfig.use_ray)")
        super().__init__(algorithm, num_actors, num_envs_per_actor, unroll_length,
                         restart_failed_actors, max_restarts, restart_window, log_dir,
                         fixed_lag)
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            # Ray's own None would join a cluster `ray start` left on this machine, and refuse
            # the num_cpus of a local one there.
            init_ray(address, max(os.cpu_count() or 1, num_actors), log_to_driver=True)
        self._in_flight = max(1, queue_size)
        self._timeout = timeout
        self._remote_cls = ray.remote(num_cpus=num_cpus_per_actor,
                                      resources=dict(resources_per_actor or {}))(_RayActor)
        self._actor_args = (algorithm_ctor, env_ctor, setup, num_envs_per_actor, seed)
        self._params_ref = ray.put(self._params())
        self._refs = {0: self._params_ref}  # with a fixed lag: the versions still needed
        self._restarts = [0] * num_actors
        self._actors: List[Any] = [self._make_actor(a) for a in range(num_actors)]
        self._calls: List[collections.deque] = [collections.deque() for _ in range(num_actors)]
        for a in range(num_actors):
            self._fill(a)

    def _params(self) -> Dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone()
                for k, v in actor_state_dict(self._algorithm).items()}

    def _make_actor(self, index: int):
        algorithm_ctor, env_ctor, setup, n, seed = self._actor_args
        actor_seed = None if seed is None else seed + index * n
        self._restarts[index] += 1
        return self._remote_cls.remote(algorithm_ctor, env_ctor, setup, n, actor_seed,
                                       self._unroll_length, index, self._num_actors,
                                       actor_torch_seed(seed, index, self._restarts[index]))

    def _fill(self, index: int, newest: Optional[int] = None) -> None:
        """Free-running: ``queue_size`` calls in flight with the newest parameters. With a
        fixed lag: every unroll whose version is published (up to ``newest``, by default the
        learner's), from the next one not taken or submitted."""
        newest = self._learner_version if newest is None else newest
        calls = self._calls[index]
        if self._fixed_lag is None:
            while len(calls) < self._in_flight:
                calls.append(self._actors[index].unroll.remote(self._params_ref,
                                                               self._learner_version))
            return
        k = self._taken[index] + len(calls)
        while k - self._fixed_lag <= newest:
            version = max(0, k - self._fixed_lag)
            calls.append(self._actors[index].unroll.remote(self._refs[version], version))
            k += 1

    def actor_pids(self) -> List[int]:
        """Deprecated (removed in 0.5): the process ids of the actors (on their machines)."""
        warn_deprecated("RayUnroller.actor_pids", "ray.util.state.list_actors()")
        return self._ray.get([a.pid.remote() for a in self._actors])

    def actor_nodes(self) -> List[str]:
        """Ray node ids of the actors."""
        return self._ray.get([a.node_id.remote() for a in self._actors])

    def _take(self, index: int):
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
                if isinstance(e, UserError):  # the input's fault: never restarted
                    # (Ray's error is an instance of the actor's; .cause is the actor's own)
                    self._fail(index, one_line(getattr(e, "cause", e)), text,
                               caused_by_input=True)
                cause = (f"sent no unroll for {self._timeout:.0f} s"
                         if isinstance(e, TimeoutError) else f"{type(e).__name__}: {first}")
                self._fail(index, cause)  # raises unless the actor may be restarted
                try:
                    ray.kill(self._actors[index], no_restart=True)
                except Exception:  # already gone
                    pass
                self._actors[index] = self._make_actor(index)
                self._calls[index].clear()
                self._fill(index)
                continue
            if self._fixed_lag is None:
                self._fill(index)
            return result, None

    def _publish(self) -> None:
        """Puts the learner's parameters into the object store; actors fetch them with their
        next call (the version is the learner's next one). With a fixed lag, submits each
        actor's unroll that waited for this version."""
        self._params_ref = self._ray.put(self._params())
        if self._fixed_lag is None:
            return
        version = self._learner_version + 1
        self._refs[version] = self._params_ref
        for v in [v for v in self._refs if v < version - self._fixed_lag]:
            del self._refs[v]  # no unroll from here on is acted with it
        for a in range(self._num_actors):
            self._fill(a, newest=version)

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
