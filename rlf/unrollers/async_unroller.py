"""AsyncUnroller: actor processes step their own environments while the learner trains.

The process transport of ``ActorUnroller``: each of ``num_actors`` processes
(``torch.multiprocessing``, *spawn*) runs ``setup`` (the trainer's ``ActorSetup``: process
settings and configuration), builds its environment and algorithm copy (``build_actor``) and
unrolls continuously. Experience goes to the learner through ``queue_size`` shared-memory
*slots* per actor, allocated once (TorchBeast's free/full buffer queues): the actor copies each
finished ``[T, B]`` unroll into a free slot and sends only the slot's index; the learner copies
it out and hands the index back. An actor without a free slot waits (back-pressure: memory
stays bounded and a fast actor cannot run away from a slow one), and no unroll pays for new
shared memory and file-descriptor passing. Parameters travel the other way through one set of
shared-memory tensors that the learner overwrites every ``unroll_parameter_update_period``
iterations, guarded by a sequence counter rather than a lock (``read_parameters``), so an
actor killed mid-copy blocks nobody. With a fixed lag ``L`` there are ``L + 1`` sets, version
``v`` in set ``v % (L + 1)``: the learner writes version ``v`` only after taking every actor's
unroll ``v - 1``, so the version an actor's unroll needs (``k - L``) stays in place until that
unroll is taken.

An actor that raises sends its traceback; an actor that dies without a word (killed,
segfault) is noticed within ``poll_seconds``. With ``log_dir`` each actor's output and
traceback go to ``log_dir/actor-<index>.log``. The learner then raises ``ActorError``, one line
naming the actor, the cause (the exception, the exit code or the signal) and the log; with
``restart_failed_actors`` it restarts the actor instead (its episodes restart), logging each
restart, until more than ``max_restarts`` fall within ``restart_window`` seconds
(``RestartPolicy``). ``close()`` stops and joins every actor (terminating stragglers), so
``finish_train``, Ctrl-C and SIGTERM of the learner leave no processes; actors ignore SIGINT
(the terminal sends it to the whole process group) and exit when the learner's process
disappears.
"""

from __future__ import annotations

import os
import queue as queue_lib
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.multiprocessing as mp

from rlf import nest
from rlf.unrollers.actor_failures import ActorError, describe_exit
from rlf.unrollers.actor_params import actor_state_dict
from rlf.unrollers.actor_unroller import (ActorUnroller, actor_torch_seed, build_actor,
                                          copy_parameters)
from rlf.unrollers.sync_unroller import SyncUnroller
from rlf.utils.common import detach
from rlf.utils.errors import UserError, one_line

__all__ = ["AsyncUnroller", "ActorError", "read_parameters"]


def _redirect_output(log_file: Optional[str], index: int, incarnation: int) -> None:
    """Sends this process's stdout and stderr (file descriptors 1 and 2, so also what C
    libraries print) to the end of ``log_file``."""
    if not log_file:
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    print(f"[actor {index} start {incarnation}, pid {os.getpid()}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}]", flush=True)


def read_parameters(params: Dict[str, torch.Tensor], shared: Dict[str, torch.Tensor],
                    sequence, last: int, stopped: Callable[[], bool] = lambda: False) -> int:
    """Copies ``shared`` into ``params`` if the learner has published a new version since
    ``last``, without a lock (a seqlock: the learner makes ``sequence`` odd while it writes and
    even again after, and a copy that saw the counter change is repeated). An actor killed
    while copying holds nothing the learner or a restarted actor waits for.

    Args:
        params: the actor's tensors.
        shared: the learner's shared-memory tensors.
        sequence: the shared counter (``multiprocessing.Value``, lock-free).
        last: the sequence value of the actor's current copy (-1 for none).
        stopped: checked while waiting for a write to finish; True (the actor is stopped, or
            the learner died mid-write) gives up and returns ``last``.

    Returns:
        The sequence value of the copy now in ``params``; the parameter version is half of it.
    """
    while True:
        start = sequence.value
        if start == last:
            return last
        if start % 2:  # the learner is writing
            if stopped():
                return last
            time.sleep(0.0002)
            continue
        copy_parameters(params, shared)
        if sequence.value == start:
            return start


def _get_free_slot(free_queue, stop, parent_pid: int) -> Optional[int]:
    """The next free slot index (blocking), or None once stopped or orphaned."""
    while not stop.value and os.getppid() == parent_pid:
        try:
            return free_queue.get(timeout=0.5)
        except queue_lib.Empty:
            pass
    return None


def _wait_for_version(published, version: int, stopped: Callable[[], bool]) -> bool:
    """Waits until the learner has published ``version``; False if stopped meanwhile."""
    while published.value < version:
        if stopped():
            return False
        time.sleep(0.0002)
    return True


def _actor_main(index: int, incarnation: int, algorithm_ctor, env_ctor,
                setup: Optional[Callable[[], None]], num_envs: int, seed: Optional[int],
                unroll_length: int, shared: List[Dict[str, torch.Tensor]], sequences: List[Any],
                out_queue, free_queue, num_slots: int, stop, parent_pid: int,
                log_file: Optional[str] = None, num_actors: int = 1,
                torch_seed: Optional[int] = None, fixed_lag: Optional[int] = None,
                published=None, first_unroll: int = 0):
    """Body of an actor process (module-level so that *spawn* can import it).

    Messages on ``out_queue``, each tagged with ``(index, incarnation)``: once
    ``("slots", index, incarnation, slots)`` (the shared-memory unrolls), then per unroll
    ``("ok", index, incarnation, slot, version, times)``, or ``("error", index, incarnation,
    traceback, line)`` (``line``: a ``UserError``'s message as one line, else None).
    ``free_queue`` brings back the slots the learner has copied out; ``stop`` is a shared
    ``RawValue`` the learner sets to 1 to stop the actors. ``shared`` and ``sequences`` are the
    parameter sets and their seqlocks (one set, or ``fixed_lag + 1`` with ``published``, the
    newest version written); ``first_unroll`` is the index of this incarnation's first unroll.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    env = None
    try:
        _redirect_output(log_file, index, incarnation)
        env, algorithm, params = build_actor(algorithm_ctor, env_ctor, num_envs, seed, setup,
                                             index, num_actors, torch_seed)
        missing = sorted(set(params) - set(shared[0]))
        if missing:
            raise ValueError(f"actor {index}: the learner shares no tensors for {missing}")
        unroller = SyncUnroller(env, algorithm)
        slots = None
        local_sequence = -1
        unroll_index = first_unroll

        def stopped():
            return bool(stop.value) or os.getppid() != parent_pid

        while not stopped():
            if fixed_lag is None:  # the newest parameters at hand
                local_sequence = read_parameters(params, shared[0], sequences[0],
                                                 local_sequence, stopped)
                version = local_sequence // 2
            else:  # exactly version k - L
                version = max(0, unroll_index - fixed_lag)
                if not _wait_for_version(published, version, stopped):
                    return
                at = version % (fixed_lag + 1)
                read_parameters(params, shared[at], sequences[at], -1, stopped)
            unroll_index += 1
            with torch.no_grad():
                experience = detach(unroller.unroll(unroll_length))
            if slots is None:  # the first unroll gives the shapes; sent (as fds) only once
                slots = [nest.map_structure(lambda x: torch.empty_like(x).share_memory_(),
                                            experience) for _ in range(num_slots)]
                out_queue.put(("slots", index, incarnation, slots))
            slot = _get_free_slot(free_queue, stop, parent_pid)  # back-pressure
            if slot is None:
                return
            with torch.no_grad():
                nest.map_structure(lambda dst, src: dst.copy_(src), slots[slot], experience)
            out_queue.put(("ok", index, incarnation, slot, version, dict(unroller.times)))
    except BaseException as e:  # report everything, also KeyboardInterrupt/SystemExit
        try:
            text = traceback.format_exc()
            if log_file:
                print(text, file=sys.stderr, flush=True)
            line = one_line(e) if isinstance(e, UserError) else None
            out_queue.put(("error", index, incarnation, text, line), timeout=5)
            # Stay alive until stopped: the learner can only receive the slots (their file
            # descriptors) while this process exists.
            while not stop.value and os.getppid() == parent_pid:
                time.sleep(0.2)
        except Exception:
            pass
    finally:
        if env is not None:
            env.close()


class AsyncUnroller(ActorUnroller):
    """Collects experience from ``num_actors`` actor processes (see the module docstring).

    Args:
        algorithm: the learner's algorithm; its ``actor_state_dict`` is shared with the
            actors.
        algorithm_ctor: a picklable ``fn() -> algorithm`` building the actors' copy (same
            structure, no environment).
        env_ctor: a picklable ``fn(num_envs=..., seed=...) -> batched environment``.
        num_actors: actor processes.
        num_envs_per_actor: ``B`` of each actor's environment.
        unroll_length: ``T`` of each actor's unrolls.
        seed: actor ``a``'s environment ``i`` is seeded ``seed + a * B + i`` (as one
            synchronous environment of ``num_actors * B`` copies would be); None for unseeded.
        queue_size: shared-memory slots per actor: unrolls it may have finished that the
            learner has not taken yet (>= 1). An unroll is acted with parameters at most
            ``queue_size + 2`` versions old.
        setup: a picklable ``fn()`` each actor calls first (``rlf.trainers.ActorSetup``:
            process settings, gin configuration); None for nothing.
        restart_failed_actors: restart an actor that failed instead of raising.
        max_restarts: restarts allowed within ``restart_window`` seconds (over all actors);
            one more raises ``ActorError``.
        restart_window: see ``max_restarts``.
        log_dir: each actor's stdout, stderr and traceback go to
            ``log_dir/actor-<index>.log`` (appended to); None leaves them on the learner's
            terminal and puts the traceback in the ``ActorError``.
        poll_seconds: how often a waiting learner checks that the actors are alive.
        timeout: seconds without an unroll from a live actor before it counts as failed.
        fixed_lag: act unroll ``k`` with parameter version ``k - fixed_lag``
            (``ActorUnroller``); None: free-running.

    Raises:
        ValueError: for ``num_actors < 1``, ``unroll_length < 1``, ``queue_size < 1`` or
            ``fixed_lag < 0``.
    """

    def __init__(self, algorithm, algorithm_ctor: Callable[[], Any], env_ctor: Callable[..., Any],
                 num_actors: int, num_envs_per_actor: int, unroll_length: int,
                 seed: Optional[int] = None, queue_size: int = 1,
                 setup: Optional[Callable[[], None]] = None,
                 restart_failed_actors: bool = False, max_restarts: int = 3,
                 restart_window: float = 600.0, log_dir: Optional[str] = None,
                 poll_seconds: float = 1.0, timeout: float = 300.0,
                 fixed_lag: Optional[int] = None):
        if queue_size < 1:
            raise ValueError(f"AsyncUnroller: queue_size ({queue_size}) must be >= 1")
        super().__init__(algorithm, num_actors, num_envs_per_actor, unroll_length,
                         restart_failed_actors, max_restarts, restart_window, log_dir,
                         fixed_lag)
        self._ctx = mp.get_context("spawn")  # fork is unsafe with OpenMP and ALE threads
        self._algorithm_ctor, self._env_ctor = algorithm_ctor, env_ctor
        self._seed, self._setup = seed, setup
        self._poll, self._timeout = poll_seconds, timeout
        sets = 1 if fixed_lag is None else fixed_lag + 1
        params = actor_state_dict(algorithm)
        self._shared = [{k: v.detach().cpu().clone().share_memory_() for k, v in params.items()}
                        for _ in range(sets)]
        # read_parameters' seqlock of each set, and the newest version written.
        self._sequences = [self._ctx.Value("l", 0, lock=False) for _ in range(sets)]
        self._published = self._ctx.Value("l", 0, lock=False)
        self._num_slots = queue_size
        # Per incarnation: at most one "slots" and num_slots "ok" messages outstanding.
        self._queues: List[Any] = [None] * num_actors
        self._free: List[Any] = [None] * num_actors  # per incarnation: slot indices back
        self._slots: List[Optional[List[Any]]] = [None] * num_actors
        self._incarnation = [0] * num_actors
        # A raw shared flag, not an Event: terminating an actor inside Event.wait would leave
        # the Event's condition counting a sleeper that never wakes, and set() would hang.
        self._stop = self._ctx.RawValue("b", 0)
        self._procs: List[Optional[Any]] = [None] * num_actors  # spawned processes
        for a in range(num_actors):
            self._start(a)

    # ------------------------------------------------------------------ processes
    def _start(self, index: int) -> None:
        seed = None if self._seed is None else self._seed + index * self._num_envs
        # A (re)started actor gets new slots and new queues: the process it replaces may have
        # been terminated while its feeder thread held a queue's lock (which would block the
        # new one's sends for ever); its messages carry the old incarnation and are dropped.
        self._incarnation[index] += 1
        self._slots[index] = None
        self._queues[index] = self._ctx.Queue()
        free = self._ctx.Queue()
        free.cancel_join_thread()  # slot indices left unread must not block the exit
        for slot in range(self._num_slots):
            free.put(slot)
        self._free[index] = free
        log = self.log_file(index)
        p = self._ctx.Process(
            target=_actor_main, name=f"rlf-actor-{index}", daemon=True,
            args=(index, self._incarnation[index], self._algorithm_ctor, self._env_ctor,
                  self._setup, self._num_envs, seed, self._unroll_length, self._shared,
                  self._sequences, self._queues[index], free, self._num_slots, self._stop,
                  os.getpid(), None if log is None else str(log), self._num_actors,
                  actor_torch_seed(self._seed, index, self._incarnation[index]),
                  self._fixed_lag, self._published, self._taken[index]))
        p.start()
        self._procs[index] = p

    @property
    def processes(self) -> List[mp.Process]:
        """The actor processes."""
        return [p for p in self._procs if p is not None]

    def _restart_or_raise(self, index: int, cause: str, details: str = "",
                          caused_by_input: bool = False) -> None:
        self._fail(index, cause, details, caused_by_input)  # raises unless restarted
        proc = self._procs[index]
        if proc is not None and proc.is_alive():
            proc.terminate()
            proc.join(5)
        self._start(index)

    def _check_alive(self) -> None:
        for i, p in enumerate(self._procs):
            if p is not None and not p.is_alive():
                self._restart_or_raise(i, f"its process (pid {p.pid}) {describe_exit(p.exitcode)}")

    # ------------------------------------------------------------------ transport
    def _take(self, index: int):
        """The next unroll of actor ``index`` (waiting for it, watching for failures); its
        release hands the slot back to the actor (unless the actor was restarted since)."""
        start = time.perf_counter()
        while True:
            try:
                item = self._queues[index].get(timeout=self._poll)
            except queue_lib.Empty:
                self._check_alive()
                if time.perf_counter() - start > self._timeout:
                    self._restart_or_raise(index, f"sent no unroll for {self._timeout:.0f} s "
                                                  f"although its process is alive (stuck?)")
                    start = time.perf_counter()
                continue
            except (OSError, EOFError) as e:
                # The slots of an actor that died before they arrived are gone; anything
                # else is a real failure.
                proc = self._procs[index]
                if proc is not None:
                    proc.join(1.0)
                if proc is not None and proc.is_alive():
                    self._restart_or_raise(index, f"receiving its unroll failed: {e!r}")
                else:
                    self._check_alive()
                continue
            kind, incarnation = item[0], item[2]
            if incarnation != self._incarnation[index]:
                continue  # from an actor process that has been replaced
            if kind == "error":  # raises, or restarts the actor
                text, line = item[3:]
                if line is not None:  # a UserError: the input's fault, never restarted
                    self._restart_or_raise(index, line, text, caused_by_input=True)
                lines = text.strip().splitlines()
                self._restart_or_raise(index, f"raised {lines[-1] if lines else 'an exception'}",
                                       text)
            elif kind == "slots":
                self._slots[index] = item[3]
            else:
                slot, version, times = item[3:]

                def release(index=index, incarnation=incarnation, slot=slot):
                    if incarnation == self._incarnation[index]:  # not restarted meanwhile
                        self._free[index].put(slot)

                slots = self._slots[index]
                assert slots is not None  # the actor sent them before its first unroll
                return (version, slots[slot], times), release

    def _publish(self) -> None:
        """Overwrites the shared tensors of the next version's set; its sequence counter is
        odd while the copy is under way (``read_parameters``)."""
        version = self._learner_version + 1
        at = 0 if self._fixed_lag is None else version % (self._fixed_lag + 1)
        sequence = self._sequences[at]
        sequence.value += 1
        with torch.no_grad():
            for k, v in actor_state_dict(self._algorithm).items():
                self._shared[at][k].copy_(v.detach())
        sequence.value += 1
        self._published.value = version

    def close(self) -> None:
        """Stops the actors and waits for them (terminating those that do not stop)."""
        self._stop.value = 1
        deadline = time.time() + 10
        while any(p is not None and p.is_alive() for p in self._procs) and \
                time.time() < deadline:
            for q in self._queues:  # drain, so that no actor's queue feeder waits on a pipe
                try:
                    q.get(timeout=0.05)
                except (queue_lib.Empty, OSError, EOFError, ValueError):
                    # Empty, or the slots of a killed actor whose tensors are gone
                    pass
        for p in self._procs:
            if p is not None:
                if p.is_alive():
                    p.terminate()
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join(1)
        self._procs = [None] * self._num_actors

    def __del__(self):
        try:
            if any(p is not None for p in self._procs):
                self.close()
        except Exception:
            pass
