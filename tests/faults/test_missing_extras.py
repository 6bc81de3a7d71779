"""A missing optional dependency (an extra of setup.py) behind a command-line path is one
line naming the extra to install, exit status 2, nothing written: Ray actors, rliable's
aggregates in rlf.bin.compare, MuJoCo's environments and Pillow's GIFs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults._cli import CARTPOLE, REPO


def _hide(tmp_path: Path, *packages: str) -> dict:
    """An environment in which importing ``packages`` fails as if they were not installed:
    a package of that name that raises ImportError shadows the real one."""
    shadow = tmp_path / "shadow"
    for name in packages:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n")
    environ = {k: v for k, v in os.environ.items() if k != "RLF_DEBUG"}
    environ["PYTHONPATH"] = os.pathsep.join([str(shadow), str(REPO)])
    return environ


def _cli(environ, module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"rlf.bin.{module}", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=environ)


def _assert_one_line(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]


def test_ray_actors_without_ray(tmp_path):
    r = _cli(_hide(tmp_path, "ray"), "train", *CARTPOLE, "--root_dir", str(tmp_path / "run"),
             "--conf_param", "TrainerConfig.async_unroll=True",
             "--conf_param", "TrainerConfig.use_ray=True")
    _assert_one_line(r, "TrainerConfig.use_ray", "needs ray", "pip install -e '.[ray]'")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("tool, args, purpose", [
    ("tune", ["--conf", "confs/ppo_cartpole.gin", "--seeds", "0,1"], "rlf.bin.tune"),
    ("suite", ["--backend", "tune", "--conf", "confs/impala_atari.gin", "--games", "Pong"],
     "rlf.bin.suite --backend tune"),
])
def test_experiments_on_tune_without_ray(tmp_path, tool, args, purpose):
    # the tools imported Ray's modules with the experiment's options: a traceback
    r = _cli(_hide(tmp_path, "ray"), tool, *args, "--root_dir", str(tmp_path / "exp"))
    _assert_one_line(r, purpose, "needs ray", "pip install -e '.[tune]'")
    assert not (tmp_path / "exp").exists()


def test_compare_without_rliable(tmp_path):
    r = _cli(_hide(tmp_path, "rliable"), "compare", str(tmp_path / "a"), str(tmp_path / "b"),
             "--out", str(tmp_path / "out"))
    _assert_one_line(r, "rlf.bin.compare needs rliable", "pip install -e '.[suite]'")
    assert not (tmp_path / "out").exists()


def test_a_mujoco_task_without_mujoco(tmp_path):
    pytest.importorskip("gymnasium.envs.mujoco")
    r = _cli(_hide(tmp_path, "mujoco"), "train", "--conf", "confs/sac_mujoco.gin",
             "--noprogress", "--root_dir", str(tmp_path / "run"))
    _assert_one_line(r, "HalfCheetah-v5", "pip install -e '.[mujoco]'")
    assert not (tmp_path / "run").exists()


def test_a_gif_without_pillow(tmp_path):
    import numpy as np
    from rlf.utils.extras import MissingExtraError
    run = subprocess.run(
        [sys.executable, "-c",
         "import numpy as np\n"
         "from rlf.utils.video import save_video\n"
         f"save_video([np.zeros((4, 4, 3), np.uint8)] * 2, {str(tmp_path / 'ep.gif')!r})\n"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=_hide(tmp_path, "PIL"))
    assert "MissingExtraError: recording ep.gif needs PIL" in run.stderr, run.stderr[-2000:]
    assert "pip install -e '.[play]'" in run.stderr
    assert not (tmp_path / "ep.gif").exists()
    assert issubclass(MissingExtraError, ImportError) and np is not None
