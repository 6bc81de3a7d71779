"""rlf from Python, as a script or a notebook's cells: train, resume, predict, export, and
train an environment of your own.

Run: ``python examples/python_api.py`` (about a minute on 2 CPU cores).
"""

import gymnasium as gym
import numpy as np

import rlf

# %% Train PPO on CartPole for 50k agent steps (the same root_dir resumes the run).
run = rlf.train("confs/ppo_cartpole.gin", root_dir="runs/api_cartpole", steps=50_000, seed=0)
print(f"{run.iterations} iterations, {run.env_steps} agent steps, "
      f"AverageReturn {run.metrics['AverageReturn']:.1f}")

# %% The trained policy: one observation or a batch, numpy in and numpy out.
policy = rlf.load_policy(run.root_dir)
env = gym.make("CartPole-v1")
observation, _ = env.reset(seed=0)
episode_return, done = 0.0, False
while not done:
    action, _ = policy.predict(observation)
    observation, reward, terminated, truncated, _ = env.step(int(action))
    episode_return += float(reward)
    done = terminated or truncated
print(f"one greedy episode: return {episode_return:.0f}")

# %% Export the greedy policy: a torch.export program (.pt2, torch.export.load), TorchScript
# (.pt) or ONNX (.onnx, pip install -e ".[export]").
policy.export("runs/api_cartpole/policy.pt2")
print("exported runs/api_cartpole/policy.pt2")


# %% An environment of your own: a gymnasium.Env subclass (here a Dict observation and a
# Discrete action). Defined in a module, it trains with actor processes too.
class Corridor(gym.Env):
    """Walk right to the end of 6 cells: reward 1 there, -0.01 a step."""

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
            "wall": gym.spaces.Discrete(2)})
        self.action_space = gym.spaces.Discrete(2)
        self._cell, self._t = 0, 0

    def _observation(self):
        return {"position": np.array([self._cell / 6], np.float32), "wall": int(self._cell == 0)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._cell, self._t = 0, 0
        return self._observation(), {}

    def step(self, action):
        self._cell = max(0, self._cell + (1 if int(action) == 1 else -1))
        self._t += 1
        done = self._cell >= 6
        return self._observation(), 1.0 if done else -0.01, done, self._t >= 50, {}


corridor = rlf.train("confs/ppo_cartpole.gin", root_dir="runs/api_corridor", env=Corridor,
                     steps=20_000, seed=0)
print(f"Corridor: AverageReturn {corridor.metrics['AverageReturn']:.2f} "
      f"(1 - 0.05 = 0.95 for the shortest walk)")
