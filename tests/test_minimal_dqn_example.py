"""examples/minimal_dqn.py, the guide's complete minimal subclass: its loss against a float64
transcription of one-step Q-learning (masked at a termination and an episode cut), and its
conf trains on CartPole through the trainer, in the learner and with an actor process."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from examples.minimal_dqn import MinimalDQN
from rlf.data_structures import StepType, valid_step_mask
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.utils.tensorboard_reader import read_scalar_tags

REPO = Path(__file__).resolve().parents[1]
F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def test_the_loss_is_q_learnings_over_the_valid_transitions():
    torch.manual_seed(0)
    alg = MinimalDQN(TensorSpec((3,)), BoundedTensorSpec((), torch.int64, 0, 1), gamma=0.9,
                     optimizer=torch.optim.SGD)
    step_type = torch.tensor([[M], [L], [F], [M], [F]], dtype=torch.int32)  # a cut at t = 4
    obs = torch.randn(5, 1, 3)
    info = {"observation": obs, "action": torch.tensor([[1], [0], [1], [0], [1]]),
            "reward": torch.tensor([[0.0], [1.0], [0.0], [2.0], [0.0]]),
            "discount": torch.tensor([[1.0], [0.0], [1.0], [1.0], [1.0]])}
    loss = alg.calc_loss(info).loss
    assert loss.shape == (4, 1)
    q = alg.q(obs[:, 0]).double().detach().numpy()
    target_q = alg.target_q(obs[:, 0]).double().detach().numpy()
    expected = [(q[t, info["action"][t, 0].item()] - (info["reward"][t + 1, 0].item() + 0.9
                 * info["discount"][t + 1, 0].item() * target_q[t + 1].max())) ** 2
                for t in range(4)]
    np.testing.assert_allclose(loss[:, 0].detach().numpy(), expected, rtol=1e-5)
    # LAST at t = 1 starts no transition; t = 3 precedes a cut
    assert valid_step_mask(step_type)[:4, 0].tolist() == [1.0, 0.0, 1.0, 0.0]


def test_the_conf_trains_with_the_learner_and_with_an_actor_process(tmp_path):
    for name, extra in (("sync", []), ("actor", ["TrainerConfig.async_unroll=True",
                                                 "TrainerConfig.num_actors=1",
                                                 "TrainerConfig.deterministic=True"])):
        cmd = [sys.executable, "-m", "rlf.bin.train", "--conf",
               "examples/minimal_dqn_cartpole.gin", "--root_dir", str(tmp_path / name),
               "--noprogress"]
        for p in ["TrainerConfig.num_env_steps=0", "TrainerConfig.num_iterations=300",
                  "TrainerConfig.initial_collect_steps=200", "TrainerConfig.evaluate=False",
                  *extra]:
            cmd += ["--conf_param", p]
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "finished: 300 iterations" in r.stdout
        steps, values, _ = read_scalar_tags(tmp_path / name / "train",
                                            ["loss/MinimalDQN"])["loss/MinimalDQN"]
        assert steps and all(np.isfinite(values))  # it trained
