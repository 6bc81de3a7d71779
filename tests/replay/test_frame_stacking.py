"""Compact frame storage: re-stacked samples equal what the agent saw at rollout."""

import gymnasium as gym
import pytest
import torch

from rlf.data_structures import StepType
from rlf.environments import load
from rlf.replay import ReplayBuffer


def collect(env, buffer, steps, seed=0):
    """Runs random actions, adding time steps to the buffer; returns {(env, pos): obs}."""
    seen = {}
    g = torch.Generator().manual_seed(seed)
    ts = env.reset()
    n = env.batch_size
    spec = env.action_spec()
    for _ in range(steps):
        pos = buffer.current_pos
        for e in range(n):
            seen[(e, int(pos[e]))] = ts.observation[e].clone()
        buffer.add_batch({"time_step": ts._replace(env_info={})})
        low = int(spec.minimum)
        action = torch.randint(low, low + spec.num_values, (n,), generator=g)
        ts = env.step(action)
    return seen


def check_samples(buffer, seen, batch_size, batch_length):
    batch, info = buffer.get_batch(batch_size, batch_length)
    obs = batch["time_step"].observation
    assert obs.shape[:2] == (batch_size, batch_length)
    for b in range(batch_size):
        e, p = int(info.env_ids[b]), int(info.positions[b])
        for t in range(batch_length):
            assert torch.equal(obs[b, t], seen[(e, p + t)]), (e, p + t)
    return batch


def test_pong_restacked_frames_equal_environment_frames():
    # 200-frame episodes (50 agent steps) give many episode starts; the ring of 64 wraps.
    env = load("ALE/Pong-v5", 3, seed=0, max_num_frames_per_episode=200)
    spec = {"time_step": env.time_step_spec()._replace(env_info={})}
    buffer = ReplayBuffer(spec, 3, 64, stacked_frames={"time_step.observation": 4})
    assert buffer.num_earliest_frames_ignored == 3
    # one stored frame per step: 84 * 84 bytes, not 4 * 84 * 84
    assert buffer.get_buffer("time_step|observation").shape == (3, 64, 84, 84)
    seen = collect(env, buffer, 180)
    batch = check_samples(buffer, seen, 300, 6)
    step_type = batch["time_step"].step_type
    assert (step_type == StepType.FIRST).any()  # episode starts really were sampled
    # and so were stacks that straddle one (a FIRST among the last 3 steps of a sequence)
    assert (step_type[:, 1:] == StepType.FIRST).any()
    all_steps = buffer.gather_all()["time_step"].observation
    pos = buffer.current_pos
    held = buffer.max_length - buffer.num_earliest_frames_ignored
    assert all_steps.shape == (3, held, 4, 84, 84)
    for e in range(3):
        for i in range(held):
            assert torch.equal(all_steps[e, i], seen[(e, int(pos[e]) - held + i)])
    # ring by ring, the same stacks
    assert torch.equal(buffer.gather_held()["time_step"].observation, all_steps.flatten(0, 1))
    env.close()


def test_first_frame_padding_matches_gymnasium_frame_stack():

    def wrap(e):
        return gym.wrappers.FrameStackObservation(e, 3, padding_type="reset")

    env = load("CartPole-v1", 2, seed=1, wrappers=[wrap])
    spec = {"time_step": env.time_step_spec()._replace(env_info={})}
    buffer = ReplayBuffer(spec, 2, 40, stacked_frames={"time_step.observation": 3},
                          frame_padding="first")
    seen = collect(env, buffer, 100)
    check_samples(buffer, seen, 200, 4)
    env.close()


def test_stacked_frames_bad_config():
    env = load("CartPole-v1", 1)
    spec = {"time_step": env.time_step_spec()._replace(env_info={})}
    with pytest.raises(ValueError, match="not leaves"):
        ReplayBuffer(spec, 1, 8, stacked_frames={"time_step.obs": 4})
    with pytest.raises(ValueError, match=r"expected \[3, ...\]"):
        ReplayBuffer(spec, 1, 8, stacked_frames={"time_step.observation": 3})
