"""AsyncUnroller: actor processes step their own environments while the learner trains.

Each of ``num_actors`` processes (``torch.multiprocessing``, *spawn*) builds its own batched
environment of ``B`` copies and a copy of the algorithm, and runs ``SyncUnroller`` continuously
with ``rollout_step``. Experience goes to the learner through ``queue_size`` shared-memory
*slots* per actor, allocated once (TorchBeast's free/full buffer queues): the actor copies each
finished ``[T, B]`` unroll into a free slot and sends only the slot's index; the learner copies
it out and hands the index back. An actor without a free slot waits (back-pressure: memory
stays bounded and a fast actor cannot run away from a slow one), and no unroll pays for new
shared memory and file-descriptor passing (torch's queue does both for every tensor it
sends). Parameters travel the other way through one set of shared-memory tensors that the
learner overwrites (guarded by a sequence counter, not a lock) every
``unroll_parameter_update_period`` iterations; actors copy them in before each unroll. Actors
run ``niceness`` nice levels below the learner, the usual bottleneck where they share its
cores.

``unroll(T)`` returns one unroll from every actor, concatenated along the batch dimension
(``[T, num_actors * B]``, environment ids offset by ``actor * B``), so everything downstream
(metrics, replay buffer, training) is the same as with ``SyncUnroller``. Each unroll carries
the parameter version it was acted with; ``policy_lag`` is the learner's version minus it.

An actor that raises sends its traceback; an actor that dies without a word (killed,
segfault) is noticed within ``poll_seconds``. With ``log_dir`` each actor's output and
traceback go to ``log_dir/actor-<index>.log``. The learner then raises ``ActorError``, one line
naming the actor, the cause (the exception, the exit code or the signal) and the log; with
``restart_failed_actors`` it restarts the actor instead (its episodes restart), logging each
restart, until more than ``max_restarts`` fall within ``restart_window`` seconds
(``RestartPolicy``).
``close()`` stops and joins every actor (terminating stragglers), so ``finish_train``, Ctrl-C
and SIGTERM of the learner leave no processes; actors ignore SIGINT (the terminal sends it to
the whole process group) and exit when the learner's process disappears.
"""

from __future__ import annotations

import os
import queue as queue_lib
import signal
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.multiprocessing as mp

from pathlib import Path

from rlf import nest
from rlf.unrollers.actor_failures import ActorError, RestartPolicy, describe_exit
from rlf.unrollers.sync_unroller import SyncUnroller
from rlf.utils.common import detach

__all__ = ["AsyncUnroller", "ActorError"]


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


def _shared_state(module: torch.nn.Module, exclude_prefix: str = "_metrics.") -> Dict[str, Any]:
    # nn.Module's own state_dict: Algorithm's adds optimizer states, which actors lack.
    return {k: v for k, v in torch.nn.Module.state_dict(module, keep_vars=True).items()
            if isinstance(v, torch.Tensor) and not k.startswith(exclude_prefix)}


def _lower_priority(niceness: int) -> None:
    """Lowers every thread of this process by ``niceness`` nice levels (at most to 19).

    Linux keeps a nice value per thread, and a new thread inherits its creator's: the threads
    that exist already (a spawned actor has one besides its main thread by then) are reniced
    one by one, and the environment's threads, started later, inherit the main thread's
    value. Elsewhere ``os.nice`` lowers the process.
    """
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: not Linux
        if hasattr(os, "nice"):
            os.nice(niceness)
        return
    for tid in tids:
        try:
            value = min(os.getpriority(os.PRIO_PROCESS, tid) + niceness, 19)
            os.setpriority(os.PRIO_PROCESS, tid, value)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def build_actor(algorithm_ctor, env_ctor, gin_config: str, num_envs: int,
                seed: Optional[int], num_threads: int, flush_denormal: bool = True,
                niceness: int = 0):
    """Builds an actor's environment and algorithm copy (in the actor's process), with
    ``num_threads`` torch threads and ``torch.set_flush_denormal(flush_denormal)``, after
    lowering the scheduling priority of the process's threads by ``niceness`` nice levels
    (the environment's threads, started afterwards, inherit it).

    The copy only runs no-grad forward passes over one step of ``num_envs`` observations, so
    its weights are laid out for that (parameters still arrive by ``copy_``, which converts):
    - 4-d weights in the default (contiguous) memory format: oneDNN was 1.2-1.6x faster in
      it than in the channels-last one that suits the learner's training batches
      (``_ConvStack``);
    - ``nn.Linear`` weights ``[out, in]`` stored transposed (``weight.t()`` contiguous), so
      that ``F.linear``'s GEMM reads them without a transpose: NatureCNN's 3136 x 512 layer
      on 16 rows took 0.60 ms instead of 0.93 ms (one thread, idle machine).

    Returns:
        ``(env, algorithm, params)``: ``params`` maps names to the algorithm's parameter and
        buffer tensors that the learner shares (``_shared_state``).
    """
    if niceness:  # before the environment starts its threads
        _lower_priority(niceness)
    torch.set_num_threads(num_threads)
    torch.set_flush_denormal(flush_denormal)
    if gin_config:
        import gin
        import rlf.bin.gin_utils as gin_utils
        gin_utils.register_all()
        gin.parse_config(gin_config)
    env = env_ctor(num_envs=num_envs, seed=seed)
    algorithm = algorithm_ctor().to(memory_format=torch.contiguous_format)
    for m in algorithm.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = m.weight.data.t().contiguous().t()
    return env, algorithm, _shared_state(algorithm)


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


def read_parameters(params: Dict[str, torch.Tensor], shared: Dict[str, torch.Tensor],
                    sequence, last: int) -> int:
    """Copies ``shared`` into ``params`` if the learner has published a new version since
    ``last``, without a lock (a seqlock: the learner makes ``sequence`` odd while it writes and
    even again after, and a copy that saw the counter change is repeated). An actor killed
    while copying holds nothing the learner or a restarted actor waits for.

    Args:
        params: the actor's tensors.
        shared: the learner's shared-memory tensors.
        sequence: the shared counter (``multiprocessing.Value``, lock-free).
        last: the sequence value of the actor's current copy (-1 for none).

    Returns:
        The sequence value of the copy now in ``params``; the parameter version is half of it.
    """
    while True:
        start = sequence.value
        if start == last:
            return last
        if start % 2:  # the learner is writing
            time.sleep(0.0002)
            continue
        copy_parameters(params, shared)
        if sequence.value == start:
            return start


def _get_free_slot(free_queue, stop_event, parent_pid: int) -> Optional[int]:
    """The next free slot index (blocking), or None once stopped or orphaned."""
    while not stop_event.is_set() and os.getppid() == parent_pid:
        try:
            return free_queue.get(timeout=0.5)
        except queue_lib.Empty:
            pass
    return None


def _actor_main(index: int, incarnation: int, algorithm_ctor, env_ctor, gin_config: str,
                num_envs: int, seed: Optional[int], unroll_length: int,
                shared: Dict[str, torch.Tensor], sequence, out_queue, free_queue,
                num_slots: int, stop_event, num_threads: int, parent_pid: int,
                flush_denormal: bool, niceness: int, log_file: Optional[str] = None):
    """Body of an actor process (module-level so that *spawn* can import it).

    Messages on ``out_queue``, each tagged with ``(index, incarnation)``: once
    ``("slots", index, incarnation, slots)`` (the shared-memory unrolls), then per unroll
    ``("ok", index, incarnation, slot, version, times)``, or ``("error", index, incarnation,
    traceback)``. ``free_queue`` brings back the slots the learner has copied out.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the learner's to handle
    env = None
    try:
        _redirect_output(log_file, index, incarnation)
        env, algorithm, params = build_actor(algorithm_ctor, env_ctor, gin_config, num_envs,
                                             seed, num_threads, flush_denormal, niceness)
        missing = sorted(set(params) - set(shared))
        if missing:
            raise ValueError(f"actor {index}: the learner shares no tensors for {missing}")
        unroller = SyncUnroller(env, algorithm)
        slots = None
        local_sequence = -1
        while not stop_event.is_set() and os.getppid() == parent_pid:
            local_sequence = read_parameters(params, shared, sequence, local_sequence)
            with torch.no_grad():
                experience = detach(unroller.unroll(unroll_length))
            if slots is None:  # the first unroll gives the shapes; sent (as fds) only once
                slots = [nest.map_structure(lambda x: torch.empty_like(x).share_memory_(),
                                            experience) for _ in range(num_slots)]
                out_queue.put(("slots", index, incarnation, slots))
            slot = _get_free_slot(free_queue, stop_event, parent_pid)  # back-pressure
            if slot is None:
                return
            with torch.no_grad():
                nest.map_structure(lambda dst, src: dst.copy_(src), slots[slot], experience)
            out_queue.put(("ok", index, incarnation, slot, local_sequence // 2,
                           dict(unroller.times)))
    except BaseException:  # report everything, also KeyboardInterrupt/SystemExit
        try:
            text = traceback.format_exc()
            if log_file:
                print(text, file=sys.stderr, flush=True)
            out_queue.put(("error", index, incarnation, text), timeout=5)
            # Stay alive until stopped: the learner can only receive the slots (their file
            # descriptors) while this process exists.
            while not stop_event.wait(0.5) and os.getppid() == parent_pid:
                pass
        except Exception:
            pass
    finally:
        if env is not None:
            env.close()


class AsyncUnroller:
    """Collects experience from ``num_actors`` actor processes (see the module docstring).

    Args:
        algorithm: the learner's algorithm; its parameters and buffers (except metrics) are
            shared with the actors.
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
        gin_config: gin bindings the actors parse first (``gin.config_str()``), so gin-built
            algorithms and environments match the learner's.
        num_threads: torch threads per actor.
        flush_denormal: ``torch.set_flush_denormal`` in the actors (see ``TrainerConfig``).
        niceness: how many nice levels the actors run below the learner (see
            ``TrainerConfig.actor_niceness``); 0 keeps the learner's.
        restart_failed_actors: restart an actor that failed instead of raising.
        max_restarts: restarts allowed within ``restart_window`` seconds (over all actors);
            one more raises ``ActorError``.
        restart_window: see ``max_restarts``.
        log_dir: each actor's stdout, stderr and traceback go to
            ``log_dir/actor-<index>.log`` (appended to); None leaves them on the learner's
            terminal and puts the traceback in the ``ActorError``.
        poll_seconds: how often a waiting learner checks that the actors are alive.
        timeout: seconds without an unroll from a live actor before it counts as failed.

    Raises:
        ValueError: for ``num_actors < 1``, ``unroll_length < 1`` or ``queue_size < 1``.
    """

    def __init__(self, algorithm, algorithm_ctor: Callable[[], Any], env_ctor: Callable[..., Any],
                 num_actors: int, num_envs_per_actor: int, unroll_length: int,
                 seed: Optional[int] = None, queue_size: int = 1, gin_config: str = "",
                 num_threads: int = 1, restart_failed_actors: bool = False,
                 poll_seconds: float = 1.0, timeout: float = 300.0,
                 flush_denormal: bool = True, niceness: int = 0, max_restarts: int = 3,
                 restart_window: float = 600.0, log_dir: Optional[str] = None):
        if num_actors < 1 or unroll_length < 1 or queue_size < 1:
            raise ValueError(f"AsyncUnroller: num_actors ({num_actors}), unroll_length "
                             f"({unroll_length}) and queue_size ({queue_size}) must be >= 1")
        self._algorithm = algorithm
        self._ctx = mp.get_context("spawn")  # fork is unsafe with OpenMP and ALE threads
        self._algorithm_ctor, self._env_ctor = algorithm_ctor, env_ctor
        self._num_actors, self._num_envs = num_actors, num_envs_per_actor
        self._unroll_length, self._seed = unroll_length, seed
        self._gin_config, self._num_threads = gin_config, num_threads
        self._flush_denormal, self._niceness = flush_denormal, niceness
        self._restarts = RestartPolicy(restart_failed_actors, max_restarts, restart_window)
        self._log_dir = None if log_dir is None else Path(log_dir)
        self._poll = poll_seconds
        self._timeout = timeout
        self._shared = {k: v.detach().cpu().clone().share_memory_()
                        for k, v in _shared_state(algorithm).items()}
        self._sequence = self._ctx.Value("l", 0, lock=False)  # read_parameters' seqlock
        self._num_slots = queue_size
        # At most one "slots" and num_slots "ok" messages are outstanding per incarnation.
        self._queues = [self._ctx.Queue() for _ in range(num_actors)]
        self._free: List[Any] = [None] * num_actors  # per incarnation: slot indices back
        self._slots: List[Optional[List[Any]]] = [None] * num_actors
        self._incarnation = [0] * num_actors
        self._stop = self._ctx.Event()
        self._procs: List[Optional[mp.Process]] = [None] * num_actors
        self._learner_version = 0
        self.times: Dict[str, float] = {"env_step": 0.0, "policy": 0.0, "wait": 0.0}
        self.policy_lag: float = 0.0
        for a in range(num_actors):
            self._start(a)

    # ------------------------------------------------------------------ processes
    def _start(self, index: int) -> None:
        seed = None if self._seed is None else self._seed + index * self._num_envs
        # A (re)started actor gets new slots and a new free queue; messages of the process it
        # replaces carry the old incarnation and are dropped.
        self._incarnation[index] += 1
        self._slots[index] = None
        free = self._ctx.Queue()
        free.cancel_join_thread()  # slot indices left unread must not block the exit
        for slot in range(self._num_slots):
            free.put(slot)
        self._free[index] = free
        p = self._ctx.Process(
            target=_actor_main, name=f"rlf-actor-{index}", daemon=True,
            args=(index, self._incarnation[index], self._algorithm_ctor, self._env_ctor,
                  self._gin_config, self._num_envs, seed, self._unroll_length, self._shared,
                  self._sequence, self._queues[index], free, self._num_slots,
                  self._stop, self._num_threads, os.getpid(), self._flush_denormal,
                  self._niceness, None if self._log_dir is None else str(self.log_file(index))))
        p.start()
        self._procs[index] = p

    @property
    def batch_size(self) -> int:
        """Environments over all actors, ``num_actors * B``."""
        return self._num_actors * self._num_envs

    @property
    def processes(self) -> List[mp.Process]:
        """The actor processes."""
        return [p for p in self._procs if p is not None]

    @property
    def restarts(self) -> int:
        """Actor restarts so far."""
        return self._restarts.total

    def log_file(self, index: int) -> Optional[Path]:
        """Actor ``index``'s log file (``log_dir/actor-<index>.log``), or None."""
        return None if self._log_dir is None else self._log_dir / f"actor-{index}.log"

    def _fail(self, index: int, cause: str, details: str = "") -> None:
        """Restarts actor ``index`` or raises ``ActorError`` (``RestartPolicy``).

        Args:
            cause: one line (``"was killed by signal SIGKILL"``).
            details: its traceback; put in the error when there is no log file.
        """
        self._restarts.restart_or_raise(index, cause, self.log_file(index), self.close,
                                        details=details)
        proc = self._procs[index]
        if proc is not None and proc.is_alive():
            proc.terminate()
            proc.join(5)
        self._start(index)

    def _check_alive(self) -> None:
        for i, p in enumerate(self._procs):
            if p is not None and not p.is_alive():
                self._fail(i, f"its process (pid {p.pid}) {describe_exit(p.exitcode)}")

    # ------------------------------------------------------------------ interface
    def unroll(self, unroll_length: int) -> Optional[Any]:
        """One ``[T, num_actors * B]`` unroll: the next unroll of every actor.

        Args:
            unroll_length: must equal the actors' ``unroll_length`` (0 returns None).

        Raises:
            ActorError: if an actor failed (with its traceback) and restarts are off.
            ValueError: for another ``unroll_length``.
        """
        if unroll_length == 0:
            return None
        if unroll_length != self._unroll_length:
            raise ValueError(f"AsyncUnroller: actors unroll {self._unroll_length} steps, "
                             f"asked for {unroll_length}")
        t0 = time.perf_counter()
        taken = [self._next(a) for a in range(self._num_actors)]
        wait = time.perf_counter() - t0
        # combine_unrolls copies out of the slots (torch.cat allocates, also for one actor),
        # so they can go back to their actors.
        experience, times, self.policy_lag = combine_unrolls(
            [result for _, _, result in taken], self._num_envs, self._learner_version)
        for a, (incarnation, slot, _) in enumerate(taken):
            if incarnation == self._incarnation[a]:  # not restarted meanwhile
                self._free[a].put(slot)
        self.times = dict(times, wait=wait)
        return experience

    def _next(self, index: int):
        """The next unroll of actor ``index`` (waiting for it, watching for failures).

        Returns:
            ``(incarnation, slot, (version, experience, times))``; ``experience`` is a view
            of the slot, valid until the slot goes back to the actor.
        """
        start = time.perf_counter()
        while True:
            try:
                item = self._queues[index].get(timeout=self._poll)
            except queue_lib.Empty:
                self._check_alive()
                if time.perf_counter() - start > self._timeout:
                    self._fail(index, f"sent no unroll for {self._timeout:.0f} s although "
                                      f"its process is alive (stuck?)")
                    start = time.perf_counter()
                continue
            except (OSError, EOFError) as e:
                # The slots of an actor that died before they arrived are gone; anything
                # else is a real failure.
                proc = self._procs[index]
                if proc is not None:
                    proc.join(1.0)
                if proc is not None and proc.is_alive():
                    self._fail(index, f"receiving its unroll failed: {e!r}")
                else:
                    self._check_alive()
                continue
            kind, incarnation = item[0], item[2]
            if incarnation != self._incarnation[index]:
                continue  # from an actor process that has been replaced
            if kind == "error":  # raises, or restarts the actor
                lines = item[3].strip().splitlines()
                self._fail(index, f"raised {lines[-1] if lines else 'an exception'}", item[3])
            elif kind == "slots":
                self._slots[index] = item[3]
            else:
                slot, version, times = item[3:]
                return incarnation, slot, (version, self._slots[index][slot], times)

    def update_parameters(self) -> None:
        """Copies the learner's current parameters to the actors (a new version; the
        sequence counter is odd while the copy is under way, see ``read_parameters``)."""
        self._sequence.value += 1
        with torch.no_grad():
            for k, v in _shared_state(self._algorithm).items():
                self._shared[k].copy_(v.detach())
        self._sequence.value += 1
        self._learner_version = self._sequence.value // 2

    def state_dict(self) -> Dict[str, Any]:
        """Nothing to restore: actors restart their episodes after a resume."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> bool:
        """Returns False: the environments cannot be restored (see ``state_dict``)."""
        return False

    def close(self) -> None:
        """Stops the actors and waits for them (terminating those that do not stop)."""
        self._stop.set()
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
