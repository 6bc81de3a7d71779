"""Recurrent PPO's memory target, read back from TensorBoard: on CartPole-v1 with its
velocities masked (confs/ppo_cartpole_novel.gin, seeds 0, 1, 2) the final greedy evaluation
(10 episodes) after 100k environment steps is >= 475, with the training return beside it;
the same policy with its LSTM state zeroed at every step, and the feed-forward
confs/ppo_cartpole.gin on the masked task, score far lower.

    python bench/recurrent_ppo_learning.py [--seeds 0 1 2] [--feed_forward_seeds 0]

For scale: sb3-contrib's RecurrentPPO (rl-baselines3-zoo's CartPoleNoVel-v1 model: 8
environments, n_steps 32, 20 epochs, normalised observations and rewards) reaches 500 +- 0
after 100k steps.
"""

import learning

if __name__ == "__main__":
    learning.memory_targets_main("confs/ppo_cartpole_novel.gin", "confs/ppo_cartpole.gin",
                                 100_000, 475.0)
