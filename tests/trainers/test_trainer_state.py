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


def test_a_trainer_given_no_world_in_a_joined_process_takes_its_group_with_a_warning(tmp_path):
    import warnings

    import pytest

    from rlf.algorithms import TrainerConfig
    from rlf.trainers import Trainer
    from rlf.utils.errors import UserError
    config = TrainerConfig(algorithm_ctor=object, num_learners=1)
    distributed.set_world(distributed.World(rank=1, size=2))  # as join_learners leaves it
    try:
        with pytest.warns(DeprecationWarning, match=r"^Trainer\(world=None\) in a process "
                                                    r"that joined a group of learners"):
            trainer = Trainer(config, tmp_path / "run", progress=False)
    finally:
        distributed.set_world(distributed.World())
    # the group it took: refused as one of its 2 learners, before anything is built
    with pytest.raises(UserError, match=r"num_learners = 1, but this process is one of 2"):
        trainer.build()
    assert not (tmp_path / "run").exists()
    # out of a group, a trainer is one learner, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(config, tmp_path / "other", progress=False)
