"""SAC's learning targets, read back from TensorBoard:

- Pendulum-v1 (confs/sac_pendulum.gin, seeds 0, 1, 2): the training ``AverageReturn`` (the
  mean of the last 10 episodes) >= -200 within 15k environment steps;
- with ``--mujoco``: HalfCheetah-v5 (confs/sac_mujoco.gin, one seed): ``AverageReturn``
  >= 3,000 at 100k environment steps (the greedy evaluation printed beside it).

    python bench/sac_learning.py [--seeds 0 1 2] [--conf_param ...]
    python bench/sac_learning.py --mujoco --seeds 0 --root_dir runs/sac_halfcheetah

For scale: published SAC reaches roughly 3,000-5,000 on HalfCheetah at 100k steps
(Haarnoja et al. 2018, fig. 1; rl-baselines3-zoo).
"""

import learning

if __name__ == "__main__":
    learning.control_targets_main("confs/sac_pendulum.gin", "confs/sac_mujoco.gin")
