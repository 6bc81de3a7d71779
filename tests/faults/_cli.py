"""Helpers of the fault tests: run rlf's command-line tools as a user does, hash files."""

import contextlib
import hashlib
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional

REPO = Path(__file__).resolve().parents[2]

# A 3-iteration CartPole run of the shipped IMPALA conf (later --conf_param's win).
CARTPOLE = ["--conf", "confs/impala_cartpole.gin", "--noprogress",
            "--conf_param", "TrainerConfig.evaluate=False",
            "--conf_param", "TrainerConfig.num_env_steps=0",
            "--conf_param", "TrainerConfig.num_iterations=3"]


def run_cli(module: str, *args: str, timeout: float = 180,
            file_size_limit: Optional[int] = None, **env) -> subprocess.CompletedProcess:
    """``python -m rlf.bin.<module> args`` from the repository root; RLF_DEBUG cleared.

    ``file_size_limit``: the process's files may not grow past this many bytes; writes past
    it fail (EFBIG) as they do on a full disk (ENOSPC).
    """
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    environ.update(env)
    limit = None if file_size_limit is None else lambda: _limit_file_size(file_size_limit)
    return subprocess.run([sys.executable, "-m", f"rlf.bin.{module}", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env=environ,
                          preexec_fn=limit)


def run_train_many(cases: List[List[str]], timeout: float = 600) -> List[Dict[str, object]]:
    """``python -m rlf.bin.train`` with each argument list of ``cases``, all in one process
    (``tests/faults/_many_cli.py``): ``[{"returncode", "stdout", "stderr"}]`` per case."""
    import json
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    result = subprocess.run([sys.executable, "-m", "tests.faults._many_cli"], cwd=REPO,
                            input=json.dumps(cases), capture_output=True, text=True,
                            timeout=timeout, env=environ)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _limit_file_size(limit: int) -> None:
    """This process's files may not grow past ``limit`` bytes: writes past it fail (EFBIG,
    SIGXFSZ ignored), as they do on a full disk (ENOSPC)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE,
                       (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def lines(text: str) -> List[str]:
    """The non-blank lines of ``text``."""
    return [line for line in text.splitlines() if line.strip()]


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def digests(directory) -> Dict[str, str]:
    """``{file name: sha256}`` of every file in ``directory``."""
    return {p.name: sha256(p) for p in sorted(Path(directory).iterdir()) if p.is_file()}


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """In this process, files may not grow past ``limit`` bytes for the block: writes fail
    with EFBIG, as a full disk fails them with ENOSPC."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.getsignal(signal.SIGXFSZ)
    _limit_file_size(limit)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
