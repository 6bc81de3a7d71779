"""R2D2's memory target, read back from TensorBoard: on CartPole-v1 with its velocities
masked (confs/r2d2_cartpole_novel.gin, seeds 0, 1, 2) the final greedy evaluation (10
episodes) after 300k environment steps is >= 400, with the training return beside it; the
same policy with its LSTM state zeroed at every step, and the feed-forward
confs/dqn_cartpole.gin (its 100k steps) on the masked task, score far lower.

    python bench/r2d2_learning.py [--seeds 0 1 2] [--feed_forward_seeds 0]
"""

import learning

if __name__ == "__main__":
    learning.memory_targets_main("confs/r2d2_cartpole_novel.gin", "confs/dqn_cartpole.gin",
                                 300_000, 400.0)
