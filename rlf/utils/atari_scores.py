"""Reference scores of Atari games and the human-normalised score.

``human_normalized_score = (score - random) / (human - random)``: 0 is a uniformly random
policy, 1 a human tester. The random scores are those of Mnih et al. 2015 ("Human-level
control through deep reinforcement learning", Nature, Extended Data Table 2); the human scores
are the updated ones of Badia et al. 2020 ("Agent57", appendix), the pair of columns DeepMind's
DQN Zoo tabulates (``dqn_zoo/atari_data.py``) and later papers normalise with.
"""

from __future__ import annotations

import math
from typing import Dict, Tuple

__all__ = ["REFERENCE_SCORES", "human_normalized_score", "game_of"]

#: ``{game: (random score, human score)}``; games named as in ALE ids (``ALE/Breakout-v5``).
REFERENCE_SCORES: Dict[str, Tuple[float, float]] = {
    "Alien": (227.8, 7127.7),
    "Asterix": (210.0, 8503.3),
    "BeamRider": (363.9, 16926.5),
    "Breakout": (1.7, 30.5),
    "Enduro": (0.0, 860.5),
    "MsPacman": (307.3, 6951.6),
    "Pong": (-20.7, 14.6),
    "Qbert": (163.9, 13455.0),
    "Seaquest": (68.4, 42054.7),
    "SpaceInvaders": (148.0, 1668.7),
}


def game_of(env_name: str) -> str:
    """The game of an ALE id: ``"ALE/Breakout-v5"`` and ``"BreakoutNoFrameskip-v4"`` give
    ``"Breakout"``."""
    name = env_name.split("/")[-1].split("-")[0]
    return name[:-len("NoFrameskip")] if name.endswith("NoFrameskip") else name


def human_normalized_score(game: str, score: float) -> float:
    """``(score - random) / (human - random)`` for ``game`` (a name of ``REFERENCE_SCORES``
    or an ALE id); NaN for a game without reference scores."""
    random, human = REFERENCE_SCORES.get(game_of(game), (math.nan, math.nan))
    return (score - random) / (human - random)
