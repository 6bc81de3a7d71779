"""``ActorUnroller``: what the actor transports (processes, Ray) share.

Each of ``num_actors`` actors builds its own batched environment of ``B`` copies and a copy
of the algorithm (``build_actor``) and unrolls ``T`` steps at a time with ``SyncUnroller``.
``unroll(T)`` takes the next unroll of every actor and concatenates them along the batch
(``[T, num_actors * B]``, environment ids offset by ``actor * B``), so everything downstream
(metrics, replay buffer, training) is the same as with one ``SyncUnroller``. Each unroll
carries the parameter version it was acted with; ``policy_lag`` is the learner's version
minus it, averaged over actors. Failures go through one ``RestartPolicy``.

Free-running (``fixed_lag=None``), an actor acts with the newest parameters it has when it
starts an unroll, so the lag depends on timing. With ``fixed_lag = L`` actor unroll ``k``
(counting from 0) is acted with parameter version ``max(0, k - L)`` (version ``v``: the
learner's after ``v`` broadcasts), waiting for it if need be (cleanba, Huang et al. 2023):
with seeded environments and actors' generators (``actor_torch_seed``) a run is a function
of its seed.

A subclass supplies the transport: ``_take(index)`` (the next unroll of one actor),
``_publish()`` (the learner's parameters to the actors) and ``_stop_actors()``.
"""

from __future__ import annotations

import abc
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from rlf import nest
from rlf.networks.layouts import use_inference_layout
from rlf.unrollers.actor_failures import RestartPolicy
from rlf.unrollers.actor_params import ActorIdentity, actor_state_dict
from rlf.unrollers.unroller import Unroller

__all__ = ["ActorUnroller", "actor_torch_seed", "build_actor", "copy_parameters",
           "combine_unrolls"]


def actor_torch_seed(seed: Optional[int], index: int, incarnation: int = 1) -> Optional[int]:
    """The seed of actor ``index``'s torch generator (its action sampling): a function of the
    run's ``seed``, the index and the incarnation (a restarted actor draws anew), from numpy's
    ``SeedSequence``; None for an unseeded run."""
    if seed is None:
        return None
    import numpy as np
    return int(np.random.SeedSequence([seed, index, incarnation]).generate_state(1)[0])


def build_actor(algorithm_ctor: Callable[[], Any], env_ctor: Callable[..., Any], num_envs: int,
                seed: Optional[int], setup: Optional[Callable[[], None]] = None,
                index: int = 0, num_actors: int = 1, torch_seed: Optional[int] = None):
    """Builds an actor's environment and algorithm copy, in the actor's process, and tells
    the copy which actor it is (``algorithm.actor_identity = ActorIdentity(index, num_actors)``:
    per-actor exploration).

    Args:
        algorithm_ctor: ``fn() -> algorithm`` (the learner's structure, no environment).
        env_ctor: ``fn(num_envs=..., seed=...) -> batched environment``.
        num_envs: ``B``.
        seed: the first environment's seed (None: unseeded).
        setup: called first (process settings, configuration): the trainer's ``ActorSetup``.
        index: this actor's index, ``0 .. num_actors - 1``.
        num_actors: the number of actors.
        torch_seed: seeds torch's generator after ``setup`` (``actor_torch_seed``); None
            leaves it as the process started.

    Returns:
        ``(env, algorithm, params)``: the copy's weights are laid out for inference
        (``use_inference_layout``); ``params`` is its ``actor_state_dict``, the tensors the
        learner sends.
    """
    if setup is not None:
        setup()
    if torch_seed is not None:
        torch.manual_seed(torch_seed)
    env = env_ctor(num_envs=num_envs, seed=seed)
    algorithm: Any = use_inference_layout(algorithm_ctor())
    algorithm.actor_identity = ActorIdentity(index, num_actors)
    return env, algorithm, actor_state_dict(algorithm)


@torch.no_grad()
def copy_parameters(params: Dict[str, torch.Tensor], source: Dict[str, torch.Tensor]) -> None:
    """Copies ``source[k]`` into every ``params[k]``."""
    for k, p in params.items():
        p.copy_(source[k])


def combine_unrolls(results, num_envs_per_actor: int, learner_version: int):
    """Concatenates one ``(version, [T, B] experience, times)`` per actor along the batch.

    Returns:
        ``(experience [T, num_actors * B], times, policy_lag)``: environment ids offset by
        ``actor * B``; ``times`` summed over actors; the mean of ``learner_version - version``.
    """
    parts, env_t, pol_t, lags = [], 0.0, 0.0, []
    for a, (version, experience, times) in enumerate(results):
        ts = experience.time_step
        parts.append(experience._replace(time_step=ts._replace(
            env_id=ts.env_id + a * num_envs_per_actor)))
        env_t, pol_t = env_t + times["env_step"], pol_t + times["policy"]
        lags.append(learner_version - version)
    experience = nest.utils.cat_nests(parts, dim=1)
    return experience, {"env_step": env_t, "policy": pol_t}, sum(lags) / len(lags)


class ActorUnroller(Unroller):
    """The common part of ``AsyncUnroller`` and ``RayUnroller`` (module docstring).

    Args:
        algorithm: the learner's algorithm; its ``actor_state_dict`` goes to the actors.
        num_actors: actors (>= 1).
        num_envs_per_actor: ``B`` of each actor's environment.
        unroll_length: ``T`` of each actor's unrolls (>= 1).
        restart_failed_actors, max_restarts, restart_window: the ``RestartPolicy``.
        log_dir: where ``actor-<index>.log`` files go (None: no log files).
        fixed_lag: ``L``: unroll ``k`` of each actor is acted with parameter version
            ``max(0, k - L)`` (module docstring); None: free-running.

    Raises:
        ValueError: for ``num_actors < 1``, ``unroll_length < 1`` or ``fixed_lag < 0``.
    """

    def __init__(self, algorithm, num_actors: int, num_envs_per_actor: int, unroll_length: int,
                 restart_failed_actors: bool = False, max_restarts: int = 3,
                 restart_window: float = 600.0, log_dir: Optional[str] = None,
                 fixed_lag: Optional[int] = None):
        if num_actors < 1 or unroll_length < 1:
            raise ValueError(f"{type(self).__name__}: num_actors ({num_actors}) and "
                             f"unroll_length ({unroll_length}) must be >= 1")
        if fixed_lag is not None and fixed_lag < 0:
            raise ValueError(f"{type(self).__name__}: fixed_lag must be >= 0 or None, got "
                             f"{fixed_lag}")
        self._fixed_lag = fixed_lag
        self._taken = [0] * num_actors  # unrolls taken from each actor
        self._algorithm = algorithm
        self._num_actors, self._num_envs = num_actors, num_envs_per_actor
        self._unroll_length = unroll_length
        self._restart_policy = RestartPolicy(restart_failed_actors, max_restarts, restart_window)
        self._log_dir = None if log_dir is None else Path(log_dir)
        self._learner_version = 0
        self._policy_lag = 0.0
        self.times: Dict[str, float] = {"env_step": 0.0, "policy": 0.0, "wait": 0.0}

    # ------------------------------------------------------------------ Unroller
    @property
    def batch_size(self) -> int:
        """Environments over all actors, ``num_actors * B``."""
        return self._num_actors * self._num_envs

    @property
    def uses_actors(self) -> bool:
        """True."""
        return True

    @property
    def policy_lag(self) -> float:
        """Mean parameter versions between the learner and the actors' policies in the last
        unroll."""
        return self._policy_lag

    @property
    def restarts(self) -> int:
        """Actor restarts so far."""
        return self._restart_policy.total

    def log_file(self, index: int) -> Optional[Path]:
        """Actor ``index``'s log file (``log_dir/actor-<index>.log``), or None."""
        return None if self._log_dir is None else self._log_dir / f"actor-{index}.log"

    def unroll(self, unroll_length: int) -> Optional[Any]:
        """One ``[T, num_actors * B]`` unroll: the next unroll of every actor.

        Args:
            unroll_length: must equal the actors' ``unroll_length`` (0 returns None).

        Raises:
            ActorError: if an actor failed and is not restarted (``RestartPolicy``).
            ValueError: for another ``unroll_length``.
        """
        if unroll_length == 0:
            return None
        if unroll_length != self._unroll_length:
            raise ValueError(f"{type(self).__name__}: actors unroll {self._unroll_length} "
                             f"steps, asked for {unroll_length}")
        start = time.perf_counter()
        taken = [self._take(a) for a in range(self._num_actors)]
        wait = time.perf_counter() - start
        # combine_unrolls copies (torch.cat allocates, also for one actor), so the actors'
        # buffers can be released afterwards.
        experience, times, self._policy_lag = combine_unrolls(
            [result for result, _ in taken], self._num_envs, self._learner_version)
        self._taken = [n + 1 for n in self._taken]
        for _, release in taken:
            if release is not None:
                release()
        self.times = dict(times, wait=wait)
        return experience

    def update_parameters(self) -> None:
        """Sends the learner's current ``actor_state_dict`` to the actors (a new version)."""
        self._publish()
        self._learner_version += 1

    # ------------------------------------------------------------------ transport
    @abc.abstractmethod
    def _take(self, index: int) -> Tuple[Tuple[int, Any, Dict[str, float]],
                                         Optional[Callable[[], None]]]:
        """The next unroll of actor ``index``, waiting for it and handling failures.

        Returns:
            ``((version, [T, B] experience, times), release)``: ``release`` (or None) is
            called once the experience has been copied out.
        """

    @abc.abstractmethod
    def _publish(self) -> None:
        """Makes the learner's current ``actor_state_dict`` the actors' next parameters."""

    def _fail(self, index: int, cause: str, details: str = "",
              caused_by_input: bool = False) -> None:
        """Lets the ``RestartPolicy`` decide: returns if actor ``index`` may be restarted (the
        caller restarts it), else stops every actor and raises ``ActorError``
        (``caused_by_input``: the actor raised a ``UserError``, never restarted)."""
        self._restart_policy.restart_or_raise(index, cause, self.log_file(index), self.close,
                                              kind=self._actor_kind, details=details,
                                              caused_by_input=caused_by_input)

    _actor_kind = "actor"

