"""Policy.export and rlf.bin.export: the network of every shipped feed-forward conf, exported
as a torch.export program (read back by torch.export.load), as TorchScript (torch.jit.load)
and as ONNX (run by onnxruntime), gives the actions of ``Policy.predict``; recurrent policies
and other suffixes are refused in one line."""

import subprocess
import sys
import warnings
from pathlib import Path

import gin
import numpy as np
import pytest
import torch

import rlf
from rlf.api import Policy
from rlf.utils.errors import UserError

REPO = Path(__file__).resolve().parents[2]
RECURRENT = {"r2d2_cartpole_novel.gin", "r2d2_atari.gin", "ppo_cartpole_novel.gin"}
CONFS = sorted(p.name for p in (REPO / "confs").glob("*.gin") if p.name not in RECURRENT)


def _policy_of(conf: str) -> Policy:
    """The conf's algorithm as built for its environment, initialised, untrained."""
    from rlf.algorithms import TrainerConfig
    from rlf.environments import load_configured
    from rlf.trainers.gin_config import parse_config
    gin.clear_config()
    try:
        # (the GPU conf's network on the CPU; IQL's without its offline files)
        parse_config(str(REPO / "confs" / conf), ["TrainerConfig.device = 'cpu'"] + (
            ["TrainerConfig.offline_buffer_dir = None", "TrainerConfig.unroll_length = 1"]
            if conf.startswith("iql") else []))
        config = TrainerConfig()
        env = load_configured(num_envs=1, seed=0)
        torch.manual_seed(0)
        algorithm = config.run.algorithm_ctor(
            observation_spec=env.observation_spec(), action_spec=env.action_spec(),
            reward_spec=env.reward_spec(), env=None, config=config)
        env.close()
    finally:
        gin.clear_config()
    return Policy(algorithm.eval(), torch.device("cpu"))


def _observations(spec, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    if spec.dtype == torch.uint8:
        return rng.integers(0, 256, (n, *spec.shape), dtype=np.uint8)
    return rng.normal(size=(n, *spec.shape)).astype(np.float32)


@pytest.mark.parametrize("conf", CONFS)
def test_the_exported_files_act_as_predict(tmp_path, conf):
    pytest.importorskip("onnxruntime", reason="ONNX export needs the export extra")
    import onnxruntime
    if "mujoco" in conf:
        pytest.importorskip("mujoco", reason="the conf's MuJoCo task needs the mujoco extra")
    policy = _policy_of(conf)
    observations = _observations(policy.observation_spec, 64)
    expected, _ = policy.predict(observations)
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript
        warnings.simplefilter("ignore", DeprecationWarning)
        torchscript = torch.jit.load(str(policy.export(tmp_path / "policy.pt")))
    program = torch.export.load(str(policy.export(tmp_path / "policy.pt2"))).module()
    with torch.no_grad():
        scripted = torchscript(torch.as_tensor(observations)).numpy()
        exported = program(torch.as_tensor(observations)).numpy()
        one = program(torch.as_tensor(observations[:1])).numpy()  # the batch size is free
    assert exported.dtype == expected.dtype and np.array_equal(exported, expected)
    assert one.shape == (1, *policy.action_spec.shape)
    np.testing.assert_allclose(one, expected[:1], atol=1e-6, rtol=1e-5)  # another BLAS path
    session = onnxruntime.InferenceSession(str(policy.export(tmp_path / "policy.onnx")))
    onnx = session.run(None, {"observation": observations})[0]
    assert scripted.dtype == expected.dtype and onnx.dtype == expected.dtype
    assert scripted.shape == onnx.shape == expected.shape == (64, *policy.action_spec.shape)
    if np.issubdtype(expected.dtype, np.integer):
        assert np.array_equal(scripted, expected) and np.array_equal(onnx, expected)
    else:
        assert np.array_equal(scripted, expected)
        np.testing.assert_allclose(onnx, expected, atol=1e-5, rtol=1e-5)
    # one observation through the exported batch dimension
    single = session.run(None, {"observation": observations[:1]})[0]
    assert single.shape == (1, *policy.action_spec.shape)


def test_a_recurrent_policy_is_refused_in_one_line(tmp_path):
    policy = _policy_of("ppo_cartpole_novel.gin")
    assert policy.recurrent
    with pytest.raises(UserError, match=r"^PPOAlgorithm's policy is recurrent: exporting it "
                                        r"with its state as inputs and outputs is not "
                                        r"supported"):
        policy.export(tmp_path / "policy.pt")
    assert list(tmp_path.iterdir()) == []
    # predict carries its state instead
    observation = np.zeros(policy.observation_spec.shape, np.float32)
    _, state = policy.predict(observation)
    assert state is not None
    _, later = policy.predict(observation, state)
    assert not all(torch.equal(a, b) for a, b in zip(rlf.nest.flatten(state),
                                                      rlf.nest.flatten(later)))


def test_rlf_bin_export_writes_a_runs_policy_and_refuses_mistakes(tmp_path):
    run = rlf.train(str(REPO / "confs" / "ppo_cartpole.gin"), root_dir=tmp_path / "run",
                    steps=256, bindings=["TrainerConfig.evaluate = False"], progress=False)

    def export(*args):
        return subprocess.run([sys.executable, "-m", "rlf.bin.export", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=300)

    r = export("--root_dir", str(run.root_dir), "--out", str(tmp_path / "policy.pt2"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"wrote {tmp_path / 'policy.pt2'} (PPOAlgorithm's greedy policy" in r.stdout
    observations = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    expected, _ = run.policy().predict(observations)
    assert np.array_equal(torch.export.load(str(tmp_path / "policy.pt2")).module()(
        torch.as_tensor(observations)).numpy(), expected)
    for args, line in (
            (["--root_dir", str(run.root_dir), "--out", str(tmp_path / "policy.txt")],
             f"error: {tmp_path / 'policy.txt'}: export writes a torch.export program to a "
             f".pt2 file, TorchScript to a .pt file or ONNX to a .onnx file"),
            (["--root_dir", str(tmp_path), "--out", str(tmp_path / "p.pt")],
             f"error: {tmp_path} holds no config.gin: give a training run's directory"),
            (["--root_dir", str(run.root_dir), "--out", str(tmp_path / "p.pt"),
              "--checkpoint_step", "99"],
             f"error: checkpoint=99: {run.root_dir / 'ckpt'} has no ckpt-99.pt")):
        r = export(*args)
        assert r.returncode == 2 and r.stderr.splitlines()[0].startswith(line), r.stderr
        assert len(r.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.pt2", "run"]
