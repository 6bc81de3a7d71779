"""Recording Atari at the screen's own size: a copy of the game made alike and stepped with
the same actions plays the same episode, and ``rlf.bin.play --record`` writes its 210x160
RGB screens, not the 84x84 observation."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from rlf.environments import load
from rlf.environments.native_frames import NATIVE_SCREEN, NativeFrames

REPO = Path(__file__).resolve().parents[2]


def test_the_copy_plays_the_agents_episode_at_native_size():
    game = dict(env_name="ALE/Breakout-v5", num_envs=1, seed=11)
    env = NativeFrames(load(**game), load(**game, img_height=210, img_width=160,
                                          grayscale=False, frame_stack=1, maxpool=False))
    time_step = env.reset()
    assert env.frame().shape == (*NATIVE_SCREEN, 3) and env.frame().dtype == np.uint8
    rng = np.random.default_rng(0)
    twin_rewards, rewards, lives, twin_lives, ends = [], [], [], [], 0
    for _ in range(600):
        time_step = env.step(torch.as_tensor(rng.integers(0, 4, size=1)))
        twin = env.twin_time_step
        rewards.append(float(time_step.env_info["raw_reward"][0]))
        twin_rewards.append(float(twin.env_info["raw_reward"][0]))
        lives.append(int(time_step.env_info["lives"][0]))
        twin_lives.append(int(twin.env_info["lives"][0]))
        ends += int(time_step.is_last()[0])
    # the same sticky actions, no-op starts, bricks, lives and episode ends (Breakout under
    # random play scores and loses lives within 600 steps: the check can fail)
    assert sum(rewards) > 0 and len(set(lives)) > 1 and ends >= 1
    assert rewards == twin_rewards and lives == twin_lives and not env.diverged
    # the screen is the observation before downscaling: its luminance, shrunk to 84x84,
    # is close to the observation's newest frame (which also max-pools two frames)
    import cv2
    gray = cv2.cvtColor(env.frame(), cv2.COLOR_RGB2GRAY)
    small = cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA).astype(float)
    obs = time_step.observation[0, -1].numpy().astype(float)
    assert np.abs(small - obs).mean() < 8.0
    env.close()


def test_play_records_the_native_screen_of_an_atari_game(tmp_path):
    run = tmp_path / "run"
    train = [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_atari_sync.gin",
             "--root_dir", str(run), "--noprogress", "--conf_param", "load.num_envs=2",
             "--conf_param", "load.env_name='ALE/Breakout-v5'",
             "--conf_param", "TrainerConfig.num_iterations=1",
             "--conf_param", "TrainerConfig.num_env_steps=0",
             "--conf_param", "TrainerConfig.evaluate=False"]
    r = subprocess.run(train, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    video = tmp_path / "ep.mp4"
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(run),
                        "--num_episodes", "1", "--record", str(video), "--conf_param",
                        "load_atari.max_num_frames_per_episode=2000"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "recorded " in r.stdout and "warning" not in r.stderr
    import cv2
    capture = cv2.VideoCapture(str(video))
    ok, frame = capture.read()
    assert ok and frame.shape == (*NATIVE_SCREEN, 3)
    assert frame.std() > 0  # a screen, not a blank frame
