"""Real ALE/Pong-v5 through AtariVectorEnv."""

import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlf.data_structures import StepType
from rlf.environments import load
from rlf.environments.atari import load_atari
from rlf.tensor_specs import validate_nest

B = 2


def test_pong_specs_shapes_dtypes():
    env = load("ALE/Pong-v5", B, seed=0)
    assert env.observation_spec().shape == (4, 84, 84)
    assert env.observation_spec().dtype == torch.uint8
    assert env.action_spec().num_values == 6
    spec = env.time_step_spec()
    ts = env.reset()
    validate_nest(ts, spec, (B,), "reset")
    assert (ts.step_type == StepType.FIRST).all()
    for _ in range(5):
        ts = env.step(env.action_spec().sample((B,)))
        validate_nest(ts, spec, (B,), "step")
    assert ts.env_info["lives"].dtype == torch.int32
    env.close()


def test_pong_frame_stack_1_and_clipped_rewards():
    env = load("ALE/Pong-v5", B, seed=0, frame_stack=1)
    assert env.observation_spec().shape == (1, 84, 84)
    env.reset()
    rewards = torch.stack([env.step(env.action_spec().sample((B,))).reward
                           for _ in range(300)])
    assert set(rewards.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert (rewards != 0).any()


def test_pong_seeding():
    def run(seed):
        env = load("ALE/Pong-v5", B, seed=seed)
        frames = [env.reset().observation]
        g = torch.Generator().manual_seed(0)
        for _ in range(60):
            frames.append(env.step(torch.randint(0, 6, (B,), generator=g)).observation)
        env.close()
        return torch.stack(frames)

    a = run(7)
    assert torch.equal(a, run(7))
    assert not torch.equal(a, run(8))


def test_pong_truncation_and_termination_match_raw_env():
    """Step types against the raw AtariVectorEnv's own terminated/truncated flags.

    A 2,000-frame limit truncates env 0's episodes; env 1 is given the full limit and plays
    (always NOOP, losing 0:21) until the game really terminates.
    """
    kwargs = dict(seed=3, max_num_frames_per_episode=2000)
    env = load("ALE/Pong-v5", 1, **kwargs)
    raw = load("ALE/Pong-v5", 1, **kwargs).gym_env
    long_env = load("ALE/Pong-v5", 1, seed=3)
    raw_long = load("ALE/Pong-v5", 1, seed=3).gym_env
    action = torch.zeros(1, dtype=torch.int64)

    def check(env, raw, max_steps):
        """Steps both in lockstep until the step after the first LAST; returns `terminated`."""
        ts = env.reset()
        raw_obs, _ = raw.reset(seed=3)
        np.testing.assert_array_equal(ts.observation.numpy(), raw_obs)
        ended, terminated = False, None
        for _ in range(max_steps):
            ts = env.step(action)
            raw_obs, r, term, trunc, _ = raw.step(action.numpy())
            np.testing.assert_array_equal(ts.observation.numpy(), raw_obs)
            got = (int(ts.step_type[0]), float(ts.reward[0]), float(ts.discount[0]))
            if ended:  # the step after LAST: a new episode, whatever the action was
                assert got == (StepType.FIRST, 0.0, 1.0)
                assert ts.prev_action[0] == 0
                return terminated
            if term[0] or trunc[0]:
                assert got == (StepType.LAST, float(r[0]), 0.0 if term[0] else 1.0)
                ended, terminated = True, bool(term[0])
            else:
                assert got == (StepType.MID, float(r[0]), 1.0)
        raise AssertionError(f"no episode ended within {max_steps} steps")

    assert check(env, raw, 1000) is False, "2,000 frames should truncate"
    assert check(long_env, raw_long, 6000) is True, "the game should terminate"


def test_preprocessing_is_gin_configurable():
    import gin
    gin.parse_config("load_atari.frame_stack = 2\nload_atari.img_height = 42")
    try:
        env = load("ALE/Pong-v5", 1, seed=0)
        assert env.observation_spec().shape == (2, 42, 84)
        assert env.reset().observation.shape == (1, 2, 42, 84)
        env.close()
    finally:
        gin.clear_config()


def test_sticky_actions_and_limits_follow_the_id(monkeypatch):
    from ale_py import vector_env
    seen = {}
    original = vector_env.AtariVectorEnv.__init__

    def recording_init(self, game, num_envs, **kwargs):
        seen[game, kwargs["repeat_action_probability"]] = kwargs
        original(self, game, num_envs, **kwargs)

    monkeypatch.setattr(vector_env.AtariVectorEnv, "__init__", recording_init)
    load("ALE/Pong-v5", 1).close()
    load("PongNoFrameskip-v4", 1).close()
    load("ALE/Pong-v5", 1, repeat_action_probability=0.1).close()
    assert set(seen) == {("pong", 0.25), ("pong", 0.0), ("pong", 0.1)}
    v5 = seen["pong", 0.25]
    assert v5["frameskip"] == 4 and v5["stack_num"] == 4 and v5["noop_max"] == 30
    # rlf clips the reward itself, keeping the raw one (test below)
    assert v5["max_num_frames_per_episode"] == 108000 and not v5["reward_clipping"]
    assert seen["pong", 0.0]["frameskip"] == 4  # NoFrameskip ids get the standard skip of 4


def test_rewards_are_clipped_and_the_raw_ones_kept():
    # Space Invaders pays 5-30 points an alien: random shooting scores within 400 steps.
    env = load("ALE/SpaceInvaders-v5", 2, seed=0)
    assert env.env_info_spec()["raw_reward"].dtype == torch.float32
    ts = env.reset()
    assert ts.env_info["raw_reward"].eq(0).all()
    raw, clipped = [], []
    gen = torch.Generator().manual_seed(0)
    n = int(env.action_spec().maximum) + 1
    for _ in range(400):
        ts = env.step(torch.randint(0, n, (2,), generator=gen))
        raw.append(ts.env_info["raw_reward"])
        clipped.append(ts.reward)
    env.close()
    raw, clipped = torch.stack(raw), torch.stack(clipped)
    assert raw.max() >= 5  # unclipped points
    assert torch.equal(clipped, raw.clamp(-1, 1)) and clipped.max() == 1


def test_preprocessing_values_out_of_range_are_refused_before_the_games_start():
    # Before, frame_stack 0 or frameskip 0 failed later with a traceback, and a sticky-action
    # probability of 1.5 or noop_max -1 ran silently.
    for kw, message in [(dict(frame_stack=0), "frame_stack must be >= 1, got 0"),
                        (dict(frameskip=0), "frameskip must be >= 1, got 0"),
                        (dict(img_width=0), "img_width must be >= 1, got 0"),
                        (dict(noop_max=-1), "noop_max must be >= 0, got -1"),
                        (dict(max_num_frames_per_episode=0),
                         "max_num_frames_per_episode must be >= 1, got 0"),
                        (dict(num_threads=0), "num_threads must be >= 1, got 0"),
                        (dict(repeat_action_probability=1.5),
                         "repeat_action_probability must be in [0, 1], got 1.5")]:
        with pytest.raises(ValueError, match=re.escape(f"load_atari: {message}")):
            load_atari("ALE/Pong-v5", 1, **kw)


def test_seeds_outside_ales_int32_are_refused():
    # Before, a seed past 2**31 - 1 failed in ALE's reset with a pybind TypeError, and a
    # negative seed was passed to ALE.
    for seed, games in ((2 ** 31 - 2, 3), (2 ** 31, 1), (-1, 1)):
        with pytest.raises(ValueError, match=re.escape(
                f"load_atari: seeds {seed}..{seed + games - 1} of {games} games must lie in "
                f"[0, 2**31 - 1]")):
            load_atari("ALE/Pong-v5", games, seed=seed)
    env = load_atari("ALE/Pong-v5", 2, seed=2 ** 31 - 2)  # seeds up to 2**31 - 1
    env.reset()
    env.close()


def test_ram_observations_go_through_gymnasium():
    # Before, load() sent obs_type="ram" to load_atari, which has no such argument, and
    # load_gym() alone did not know ALE's ids.
    env = load("ALE/Pong-v5", 2, seed=0, obs_type="ram")
    assert type(env.gym_env).__name__ == "SyncVectorEnv"
    assert env.observation_spec().shape == (128,)
    assert env.observation_spec().dtype == torch.uint8
    env.reset()
    assert env.step(torch.zeros(2, dtype=torch.int64)).observation.shape == (2, 128)
    env.close()
    code = ("from rlf.environments import load_gym; "
            "print(load_gym('ALE/Pong-v5', 1, obs_type='ram').observation_spec().shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "torch.Size([128])", out.stderr
