"""Dopamine's per-seed Atari baselines at 10M frames, the suite's reference rows.

Source: google/dopamine, ``baselines/atari/data/<game>.json`` at commit
``8842298e89cfe42c80ea71f63913017696785f0f`` (Castro et al. 2018, "Dopamine: A Research
Framework for Deep Reinforcement Learning"). Each file lists, per agent and seed, the mean
training episode return of every iteration of 1M frames (250k agent steps, sticky actions
with probability 0.25, as ALE's ``v5`` environments). The values here are iteration 9, the
frames 9-10M: the measure of ``rlf.bin.suite``'s ``score_last_10pct`` at ``--frames 10M``.
Five seeds per agent, in the files' order; the files name no seed numbers.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from rlf.utils.atari_scores import human_normalized_score

__all__ = ["DOPAMINE_SOURCE", "DOPAMINE_FRAMES", "DOPAMINE_SCORES", "dopamine_matrix"]

#: Where the values come from, for reports.
DOPAMINE_SOURCE = ("google/dopamine baselines/atari/data/<game>.json @ 8842298e, iteration 9 "
                   "(training returns over frames 9-10M), 5 seeds")

#: The frames the values are measured at (the end of iteration 9).
DOPAMINE_FRAMES = 10_000_000

#: ``{agent: {game: per-seed scores}}``: the mean training return over frames 9-10M.
DOPAMINE_SCORES: Dict[str, Dict[str, Tuple[float, ...]]] = {
    "DQN": {
        "Pong": (-9.847222222222221, 6.911764705882353, 2.370967741935484,
                 -19.06341463414634, -5.0),
        "Breakout": (28.510344827586206, 21.04432132963989, 19.25925925925926,
                     19.27296587926509, 19.328804347826086),
        "BeamRider": (838.9798657718121, 778.295652173913, 652.6567164179105,
                      841.8775510204082, 1234.725663716814),
        "Qbert": (1013.1182795698925, 2521.6666666666665, 1559.1309823677582, 1634.0,
                  1564.123006833713),
        "SpaceInvaders": (640.4150197628459, 666.6334661354582, 654.515503875969,
                          681.7857142857143, 673.3333333333334),
    },
    "Rainbow": {
        "Pong": (17.21212121212121, 12.626865671641792, 14.907894736842104,
                 15.680555555555555, 15.571428571428571),
        "Breakout": (41.833333333333336, 38.24096385542169, 40.948, 45.176991150442475,
                     43.287553648068666),
        "BeamRider": (6036.255319148936, 6257.574468085107, 5415.471698113208,
                      6394.468085106383, 5809.137254901961),
        "Qbert": (4264.010989010989, 8056.643356643357, 4653.3536585365855,
                  4316.388888888889, 5478.932584269663),
        "SpaceInvaders": (703.0377358490566, 752.843137254902, 765.8024691358024,
                          768.1224489795918, 728.468992248062),
    },
}


def dopamine_matrix(agent: str, games: Sequence[str]) -> Optional[np.ndarray]:
    """``[5, len(games)]`` float64 human-normalised scores of Dopamine's ``agent`` (seeds
    as rows, in the order of ``games``), or None if a game has no values here.

    Raises:
        KeyError: for an agent not in ``DOPAMINE_SCORES``.
    """
    table = DOPAMINE_SCORES[agent]
    if any(g not in table for g in games):
        return None
    return np.array([[human_normalized_score(g, table[g][s]) for g in games]
                     for s in range(len(table[games[0]]))], dtype=np.float64)
