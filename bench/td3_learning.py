"""TD3's learning targets, read back from TensorBoard:

- Pendulum-v1 (confs/td3_pendulum.gin, seeds 0, 1, 2): the training ``AverageReturn`` (the
  mean of the last 10 episodes) >= -200 within 15k environment steps;
- with ``--mujoco``: HalfCheetah-v5 (confs/td3_mujoco.gin, one seed): ``AverageReturn``
  >= 3,000 at 100k environment steps (the greedy evaluation printed beside it).

    python bench/td3_learning.py [--seeds 0 1 2] [--conf_param ...]
    python bench/td3_learning.py --mujoco --seeds 0 --root_dir runs/td3_halfcheetah

The critics step on every update and the actor every second one: the run's TensorBoard
holds ``loss/TD3Algorithm/actor`` and ``learning_rate/TD3Algorithm/actor`` beside the
critics' (Fujimoto et al. 2018, algorithm 1).
"""

import learning

if __name__ == "__main__":
    learning.control_targets_main("confs/td3_pendulum.gin", "confs/td3_mujoco.gin")
