"""rlf from Python: train a conf, load the trained policy, predict and export it.

    run = rlf.train("confs/ppo_cartpole.gin", steps=50_000)
    policy = rlf.load_policy(run.root_dir)
    action, state = policy.predict(observation)
    policy.export("policy.onnx")

``train`` runs what ``python -m rlf.bin.train`` runs (actor processes, Ray actors, several
learners, resume, trackers), ``load_policy`` what ``rlf.bin.play`` loads.
"""

from rlf.api.policy import Policy, load_policy
from rlf.api.training import Run, train

__all__ = ["Policy", "Run", "load_policy", "train"]
