"""A learner on a real accelerator: a training step with AMP, and a checkpoint written there,
loaded on CPU and back. Runs where ``RLF_TEST_DEVICE`` names a device (``cuda``;
``bench/device_checks.py`` sets it, ``cpu`` in its smoke mode) or a CUDA device is present;
skipped elsewhere."""

import copy
import functools
import os

import pytest
import torch

from rlf import nest
from rlf.algorithms import ImpalaAlgorithm, TrainerConfig
from rlf.environments import load
from rlf.utils.checkpoint import atomic_save, load_checkpoint_file
from tests.algorithms._learners import learner_of

DEVICE = os.environ.get("RLF_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else None)
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no accelerator (set RLF_TEST_DEVICE)")
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


def _impala(device, enable_amp=False, **kwargs):
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=8, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, mini_batch_size=2, num_iterations=10,
                           device=device, enable_amp=enable_amp)
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                          optimizer=ADAM, gradient_clipping=0.5, **kwargs)
    alg.to(device)
    return alg, env


def test_an_amp_training_step_updates_every_parameter_on_the_device():
    torch.manual_seed(0)
    alg, env = _impala(DEVICE, enable_amp=True)
    before = {n: p.detach().clone() for n, p in alg.named_parameters()}
    for _ in range(3):  # whole-buffer training starts at the second unroll
        alg.train_iter()
    assert alg.num_updates > 0
    kind = torch.device(DEVICE).type
    for name, p in alg.named_parameters():
        assert p.device.type == kind and p.dtype == torch.float32, name
        assert bool(torch.isfinite(p).all()), name
    assert any(not torch.equal(before[n], p.detach()) for n, p in alg.named_parameters())
    if kind == "cuda":  # float16 autocast needs the loss scaler there
        assert learner_of(alg)._grad_scaler is not None
    env.close()


def test_experience_replay_from_a_cpu_memory_mixes_into_device_mini_batches():
    torch.manual_seed(0)
    alg, env = _impala(DEVICE, experience_replay_fraction=0.5)
    for _ in range(4):  # the memory serves once it holds more than one unroll
        alg.train_iter()
    assert alg.experience_replay_memory.total_size > 0 and alg.num_updates > 0
    assert all(bool(torch.isfinite(p).all()) for p in alg.parameters())
    env.close()


def test_a_checkpoint_written_on_the_device_loads_on_cpu_and_back(tmp_path):
    torch.manual_seed(0)
    alg, env = _impala(DEVICE)
    for _ in range(3):
        alg.train_iter()
    path = atomic_save(alg.state_dict(), tmp_path / "ckpt-3.pt")
    state = load_checkpoint_file(path)  # always to CPU
    on_cpu, cpu_env = _impala("cpu")
    on_cpu.load_state_dict(copy.deepcopy(state))
    back, back_env = _impala(DEVICE)
    back.load_state_dict(on_cpu.state_dict())
    for (name, x), y, z in zip(nest.flatten_with_path(alg.state_dict()),
                               nest.flatten(on_cpu.state_dict()),
                               nest.flatten(back.state_dict())):
        if isinstance(x, torch.Tensor):
            assert y.device.type == "cpu", name
            assert torch.equal(x.cpu(), y) and torch.equal(x, z.to(x.device)), name
    # The restored learner goes on training where it is.
    back.train_iter()
    assert all(p.device.type == torch.device(DEVICE).type for p in back.parameters())
    for e in (env, cpu_env, back_env):
        e.close()
