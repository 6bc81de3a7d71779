"""configure_process applies each process-wide setting, and only when asked."""

import os
import subprocess
import sys

import pytest


def _run(code: str) -> str:
    # Without TORCHINDUCTOR_DETERMINISTIC, which a deterministic process sets for its children
    environ = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_DETERMINISTIC"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, env=environ).stdout.strip()


def test_threads_and_denormal_flushing():
    # In a fresh process: the settings are process-wide.
    out = _run(
        "import torch\n"
        "from rlf.runtime import configure_process\n"
        "d = torch.tensor([0x00400000], dtype=torch.int32).view(torch.float32)\n"
        "before = (torch.get_num_threads(), float(d * 1.0) == 0.0)\n"
        "configure_process(num_threads=1, flush_denormal=True)\n"
        "print(before, (torch.get_num_threads(), float(d * 1.0) == 0.0))\n")
    before, after = out.split(") (")
    assert before.endswith("False") and after == "1, True)"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's per-thread nice")
def test_niceness_lowers_every_thread():
    out = _run(
        "import os, threading, time\n"
        "from rlf.runtime import configure_process\n"
        "base = os.getpriority(os.PRIO_PROCESS, 0)\n"
        "t = threading.Thread(target=time.sleep, args=(1,)); t.start()\n"
        "configure_process(niceness=2)\n"
        "tids = [int(x) for x in os.listdir('/proc/self/task')]\n"
        "print(len(tids), {os.getpriority(os.PRIO_PROCESS, i) - base for i in tids})\n")
    count, deltas = out.split(" ", 1)
    assert int(count) >= 2 and deltas == "{2}"


def test_bad_values_raise():
    from rlf.runtime import configure_process
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        configure_process(num_threads=0)
    with pytest.raises(ValueError, match="niceness must be >= 0"):
        configure_process(niceness=-1)


def test_deterministic_mode_sets_torchs_flag_without_importing_inductor():
    # torch.use_deterministic_algorithms imports torch._inductor (and TorchDynamo) to set
    # Inductor's flag: seconds of a process's start. Inductor, imported later, starts
    # deterministic all the same.
    out = _run(
        "import sys, torch\n"
        "from rlf.runtime import configure_process\n"
        "configure_process(deterministic=True)\n"
        "print(torch.are_deterministic_algorithms_enabled(), 'torch._inductor' in sys.modules)\n"
        "import torch._inductor.config as c\n"
        "print(c.deterministic)\n")
    assert out.split() == ["True", "False", "True"]


def test_deterministic_mode_sets_inductors_flag_when_it_is_imported_already():
    out = _run(
        "import torch, torch._inductor.config as c\n"
        "from rlf.runtime import configure_process\n"
        "configure_process(deterministic=True)\n"
        "print(torch.are_deterministic_algorithms_enabled(), c.deterministic)\n")
    assert out.split() == ["True", "True"]


def test_deterministic_mode_is_the_flag_torchs_operations_read():
    # Under it torch.empty fills its memory with NaN (torch.utils.deterministic
    # .fill_uninitialized_memory), on the CPU too; a fresh process without it does not
    out = _run(
        "import torch\n"
        "from rlf.runtime import configure_process\n"
        "print(bool(torch.empty(1 << 16).isnan().all()))\n"
        "configure_process(deterministic=True)\n"
        "print(bool(torch.empty(1 << 16).isnan().all()))\n")
    assert out.split() == ["False", "True"]
