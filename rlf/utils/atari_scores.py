"""Reference scores of Atari games and the human-normalised score.

``human_normalized_score = (score - random) / (human - random)``: 0 is a uniformly random
policy, 1 a human tester. The table covers the 57 games of the Atari-57 benchmark. The random
scores are those of Mnih et al. 2015 ("Human-level control through deep reinforcement
learning", Nature, Extended Data Table 2) for its 49 games and those of the later Atari-57
tables for the other eight (Berzerk, Defender, Phoenix, Pitfall, Skiing, Solaris, Surround,
YarsRevenge); the human scores are the updated ones of Badia et al. 2020 ("Agent57",
appendix): the pair of columns DeepMind's DQN Zoo tabulates (``dqn_zoo/atari_data.py``) and
later papers normalise with.
"""

from __future__ import annotations

import math
from typing import Dict, Tuple

__all__ = ["REFERENCE_SCORES", "human_normalized_score", "game_of"]

#: ``{game: (random score, human score)}``; games named as in ALE ids (``ALE/Breakout-v5``).
REFERENCE_SCORES: Dict[str, Tuple[float, float]] = {
    "Alien": (227.8, 7127.7),
    "Amidar": (5.8, 1719.5),
    "Assault": (222.4, 742.0),
    "Asterix": (210.0, 8503.3),
    "Asteroids": (719.1, 47388.7),
    "Atlantis": (12850.0, 29028.1),
    "BankHeist": (14.2, 753.1),
    "BattleZone": (2360.0, 37187.5),
    "BeamRider": (363.9, 16926.5),
    "Berzerk": (123.7, 2630.4),
    "Bowling": (23.1, 160.7),
    "Boxing": (0.1, 12.1),
    "Breakout": (1.7, 30.5),
    "Centipede": (2090.9, 12017.0),
    "ChopperCommand": (811.0, 7387.8),
    "CrazyClimber": (10780.5, 35829.4),
    "Defender": (2874.5, 18688.9),
    "DemonAttack": (152.1, 1971.0),
    "DoubleDunk": (-18.6, -16.4),
    "Enduro": (0.0, 860.5),
    "FishingDerby": (-91.7, -38.7),
    "Freeway": (0.0, 29.6),
    "Frostbite": (65.2, 4334.7),
    "Gopher": (257.6, 2412.5),
    "Gravitar": (173.0, 3351.4),
    "Hero": (1027.0, 30826.4),
    "IceHockey": (-11.2, 0.9),
    "Jamesbond": (29.0, 302.8),
    "Kangaroo": (52.0, 3035.0),
    "Krull": (1598.0, 2665.5),
    "KungFuMaster": (258.5, 22736.3),
    "MontezumaRevenge": (0.0, 4753.3),
    "MsPacman": (307.3, 6951.6),
    "NameThisGame": (2292.3, 8049.0),
    "Phoenix": (761.4, 7242.6),
    "Pitfall": (-229.4, 6463.7),
    "Pong": (-20.7, 14.6),
    "PrivateEye": (24.9, 69571.3),
    "Qbert": (163.9, 13455.0),
    "Riverraid": (1338.5, 17118.0),
    "RoadRunner": (11.5, 7845.0),
    "Robotank": (2.2, 11.9),
    "Seaquest": (68.4, 42054.7),
    "Skiing": (-17098.1, -4336.9),
    "Solaris": (1236.3, 12326.7),
    "SpaceInvaders": (148.0, 1668.7),
    "StarGunner": (664.0, 10250.0),
    "Surround": (-10.0, 6.5),
    "Tennis": (-23.8, -8.3),
    "TimePilot": (3568.0, 5229.2),
    "Tutankham": (11.4, 167.6),
    "UpNDown": (533.4, 11693.2),
    "Venture": (0.0, 1187.5),
    "VideoPinball": (16256.9, 17667.9),
    "WizardOfWor": (563.5, 4756.5),
    "YarsRevenge": (3092.9, 54576.9),
    "Zaxxon": (32.5, 9173.3),
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
