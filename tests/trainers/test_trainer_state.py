"""The trainer's part of a checkpoint: the run's iterations and environment steps are the
algorithm's counters, of which the checkpoint keeps copies for its readers."""

from rlf.algorithms.counters import Counters
from rlf.trainers.trainer_state import TrainerState
from rlf.utils import distributed, summary


def _state(iterations: int, env_steps: int) -> TrainerState:
    state = TrainerState(distributed.World())
    state.counters = Counters()
    state.counters.train_iter_num, state.counters.env_steps = iterations, env_steps
    return state


def test_the_checkpoint_copies_the_algorithms_counts():
    saved = _state(7, 300).state_dict()
    assert saved["iter_num"] == 7 and saved["env_steps"] == 300
    assert TrainerState(distributed.World()).iter_num == 0  # before the build


def test_the_algorithms_restored_count_wins_and_a_missing_one_is_upgraded():
    counter = summary.get_global_counter()
    try:
        restored = _state(7, 300)  # the algorithm's part restored first (Checkpointer order)
        restored.load_state_dict({"iter_num": 5, "global_counter": 5})
        assert restored.iter_num == 7
        upgraded = _state(0, 300)  # an algorithm part without train_iter_num
        upgraded.load_state_dict({"iter_num": 5, "global_counter": 5})
        assert upgraded.iter_num == 5 and upgraded.counters.train_iter_num == 5
    finally:
        summary.set_global_counter(counter)
