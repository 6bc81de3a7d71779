"""One contract for the data path: ``data_path`` names what the settings select, settings
the path would ignore or that contradict each other are refused with one line, and gin's
type check judges an unannotated parameter by its default only as far as its docstring
says."""

import functools

import gin
import pytest
import torch

from examples.a2c import A2C
from examples.bc import BehaviourCloning
from rlf.algorithms.training_loop import TrainingLoop
from rlf.algorithms.data_paths import make_data_path
from rlf.algorithms import (DQNAlgorithm, ImpalaAlgorithm, PPOAlgorithm, TD3Algorithm,
                            TrainerConfig)
from rlf.trainers.gin_config import ConfigError, parse_config
from rlf.environments import load
from rlf.utils.errors import UserError
from rlf.algorithms import run_args

ADAM = functools.partial(torch.optim.Adam, lr=1e-3)
CARTPOLE, PENDULUM = load("CartPole-v1", 1), load("Pendulum-v1", 1)


def _make(ctor, env=CARTPOLE, **config):
    return ctor(env.observation_spec(), env.action_spec(), config=TrainerConfig(**config),
                optimizer=ADAM)


def _path(alg):
    return make_data_path(alg, run_args(alg).config.data_path).name


def test_the_settings_select_one_named_data_path():
    assert _path(_make(A2C, unroll_length=8)) == "rollout_graph"
    assert _path(_make(PPOAlgorithm, unroll_length=8, mini_batch_size=4,
                       mini_batch_length=1)) == "unroll_epochs"
    assert _path(_make(ImpalaAlgorithm, whole_replay_buffer_training=True,
                       clear_replay_buffer=True)) == "replay_epochs"
    assert _path(_make(DQNAlgorithm, mini_batch_size=4, mini_batch_length=2)) == (
        "replay_samples")
    assert _path(_make(BehaviourCloning, unroll_length=0, offline_buffer_dir="x.pt",
                       mini_batch_size=4, mini_batch_length=2)) == "offline"
    td3 = TD3Algorithm(PENDULUM.observation_spec(), PENDULUM.action_spec(),
                       actor_optimizer=ADAM, critic_optimizer=ADAM,
                       config=TrainerConfig(mini_batch_size=4, mini_batch_length=2))
    assert _path(td3) == "replay_samples"


@pytest.mark.parametrize("ctor, settings, message", [
    (A2C, dict(unroll_length=8, unroll_with_grad=True),
     r"TrainerConfig.unroll_with_grad changes nothing for A2C's data path 'rollout_graph'"),
    (PPOAlgorithm, dict(unroll_length=8, mini_batch_size=4, unroll_with_grad=True),
     r"unroll_with_grad changes nothing for PPOAlgorithm's data path 'unroll_epochs'"),
    (A2C, dict(unroll_length=8, use_rollout_state=True),
     r"use_rollout_state changes nothing .* calls no train_step"),
    (DQNAlgorithm, dict(mini_batch_size=4, mini_batch_length=2, use_rollout_state=True,
                        temporally_independent_train_step=True),
     r"use_rollout_state carries a recurrent state .* set one of them"),
    # A feed-forward train_step has no state to start from the stored one.
    (DQNAlgorithm, dict(mini_batch_size=4, mini_batch_length=2, use_rollout_state=True),
     r"use_rollout_state = True changes nothing for DQNAlgorithm's data path "
     r"'replay_samples': .*\(its train_state_spec is empty\); remove it"),
])
def test_settings_the_path_ignores_or_that_contradict_are_refused(ctor, settings, message):
    alg = _make(ctor, **settings)
    with pytest.raises(UserError, match=message) as e:
        TrainingLoop(alg)
    assert "\n" not in str(e.value)


@gin.configurable
def _unannotated(rate=0.5, flag=False):
    return rate, flag


def test_an_unannotated_number_parameter_takes_a_list_but_not_a_string(tmp_path):
    conf = tmp_path / "c.gin"
    conf.write_text("TrainerConfig.num_iterations = 1\n")
    try:
        parse_config(str(conf), ["_unannotated.rate = [(0, 0.01), (100, 0.0)]"])
        assert gin.query_parameter("_unannotated.rate") == [(0, 0.01), (100, 0.0)]
        gin.clear_config()
        with pytest.raises(ConfigError, match=r"_unannotated.rate = 'fast': expected a number "
                                              r"\(judged by its default, 0.5; the parameter "
                                              r"has no annotation: annotate it"):
            parse_config(str(conf), ["_unannotated.rate = 'fast'"])
    finally:
        gin.clear_config()


def test_only_the_data_path_factory_reads_the_data_path_settings():
    # make_data_path is the one reader: no other module takes `<anything>.<setting>` of them
    # (config.py and config_parts.py, which define and validate the fields, and data_needs.py,
    # whose check of an algorithm's declared needs make_data_path calls, aside).
    import ast
    from pathlib import Path

    from rlf.algorithms.data_paths import DATA_PATH_SETTINGS
    rlf = Path(__file__).resolve().parents[2] / "rlf"
    allowed = {rlf / "algorithms" / "data_paths.py", rlf / "algorithms" / "config.py",
               rlf / "algorithms" / "config_parts.py", rlf / "algorithms" / "data_needs.py"}
    readers = []
    for path in sorted(rlf.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in DATA_PATH_SETTINGS:
                readers.append(f"{path.relative_to(rlf.parent)}:{node.lineno} .{node.attr}")
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr"
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in DATA_PATH_SETTINGS):
                readers.append(f"{path.relative_to(rlf.parent)}:{node.lineno} getattr")
    assert not readers, readers
    assert len(DATA_PATH_SETTINGS) >= 17
