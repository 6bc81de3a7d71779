"""``configure_process``: every process-wide setting rlf uses, in one place.

These settings change the whole process (every thread, every tensor), so library code never
applies them: ``rlf.bin.train`` calls ``configure_process`` for the learner from its
``TrainerConfig`` before building anything, and each actor process calls it first thing
(``rlf.trainers.actor_setup.ActorSetup``). A notebook or test that builds a ``Trainer`` keeps
its own process as it is unless it calls ``configure_process`` itself.

The settings and what they were measured to do on the 2-core reference machine (the figures'
commands are the ``bench/`` scripts named):

- ``num_threads`` (``torch.set_num_threads``): torch's default is one thread per core, which
  oversubscribes a 2-core machine that also runs ALE's threads or an actor process. The Atari
  conf runs the learner and the actor on one thread each.
- ``flush_denormal`` (``torch.set_flush_denormal(True)``): float32 values below 1.2e-38 become
  0. RMSProp's and Adam's second-moment averages of parameters whose gradients stay 0 decay
  into denormals, which x86 CPUs process many times slower: in a Pong checkpoint after 2,000
  iterations 29 % of NatureCNN's RMSProp square averages were denormal, and optimizer steps
  took 1.7-2.1x as long as with flushing (``bench/denormal_optimizer_step.py``).
- ``reuse_freed_memory`` (``rlf.runtime.malloc``): glibc's malloc keeps freed memory for
  reuse instead of unmapping every block above its mmap threshold; NatureCNN's training step
  page-faulted 28,096 times over 320 frames without it and took 1.28x as long
  (``bench/malloc_reuse.py``). The process keeps its peak memory. Learner only.
- ``niceness`` (``lower_priority``): actor processes run this many nice levels below the
  learner, which is the bottleneck where they share cores (Sample Factory lowers its rollout
  workers by 10). Pong with one actor on 2 cores: a median of 1,591 agent steps/s at 5 against
  1,493 at 0 (``bench/async_throughput.py``).
- ``deterministic`` (``torch.use_deterministic_algorithms(True)``, and cuBLAS's
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless set, which must precede CUDA's initialisation):
  operations without a deterministic implementation raise instead of varying from run to
  run (``TrainerConfig.deterministic``). torch's ``use_deterministic_algorithms`` also sets
  TorchInductor's ``deterministic``, importing ``torch._inductor`` and TorchDynamo to do so:
  about 2 s of CPU time (an Intel Xeon, torch 2.13) in processes that otherwise never import
  them, such as actor processes (a learner imports TorchDynamo anyway: torch's optimizers do
  when they are made). ``_enable_deterministic_algorithms`` sets torch's flag and leaves
  Inductor's to the environment variable Inductor reads when it is first imported
  (``TORCHINDUCTOR_DETERMINISTIC=1``).
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import torch

from rlf.runtime.malloc import reuse_freed_memory as _reuse_freed_memory

__all__ = ["configure_process", "lower_priority"]


def lower_priority(niceness: int) -> None:
    """Lowers every thread of this process by ``niceness`` nice levels (at most to 19).

    Linux keeps a nice value per thread, and a new thread inherits its creator's: the threads
    that exist already are reniced one by one, and threads started later (an environment's)
    inherit the main thread's value. Elsewhere ``os.nice`` lowers the process.

    Args:
        niceness: levels to lower by (>= 0); 0 does nothing.
    """
    if niceness <= 0:
        return
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


def configure_process(num_threads: Optional[int] = None, flush_denormal: Optional[bool] = None,
                      reuse_freed_memory: bool = False, niceness: int = 0,
                      deterministic: bool = False) -> None:
    """Applies the process-wide settings (see the module docstring for each one's effect).

    Args:
        num_threads: ``torch.set_num_threads``; None leaves torch's default.
        flush_denormal: ``torch.set_flush_denormal``; None leaves it as it is.
        reuse_freed_memory: keep freed memory in glibc's heap (no effect elsewhere).
        niceness: lower this process's priority by this many nice levels (``lower_priority``);
            do it before starting threads that should inherit it.
        deterministic: deterministic torch algorithms (and cuBLAS workspace); call it before
            anything uses CUDA.

    Raises:
        ValueError: for ``num_threads < 1`` or a negative ``niceness``.
    """
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"configure_process: num_threads must be >= 1, got {num_threads}")
    if niceness < 0:
        raise ValueError(f"configure_process: niceness must be >= 0, got {niceness}")
    lower_priority(niceness)
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    if flush_denormal is not None:
        torch.set_flush_denormal(flush_denormal)
    if reuse_freed_memory:
        _reuse_freed_memory()
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        _enable_deterministic_algorithms()


def _enable_deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True)`` without importing TorchInductor.

    torch's function sets its own flag and Inductor's ``config.deterministic``, importing
    ``torch._inductor.config`` (with TorchDynamo: seconds) for the second. Here torch's flag is
    set as that function sets it; Inductor's is set at once if Inductor is imported already,
    otherwise ``TORCHINDUCTOR_DETERMINISTIC=1`` (unless set) makes its configuration start
    deterministic when ``torch.compile`` first imports it, in this process or a child.
    Where torch has no ``_C._set_deterministic_algorithms``, torch's function is called.
    """
    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    inductor = sys.modules.get("torch._inductor.config")
    if set_flag is None or inductor is not None:
        torch.use_deterministic_algorithms(True)
        return
    os.environ.setdefault("TORCHINDUCTOR_DETERMINISTIC", "1")
    set_flag(True, warn_only=False)
