"""TrainerConfig is the gin face of six frozen typed parts: each part validates its own fields,
the flat names read through, and nothing changes a config once it is built."""

import dataclasses
import inspect
import pickle

import pytest

from rlf.algorithms import TrainerConfig
from rlf.algorithms.config import _PARTS, _REMOVED
from rlf.algorithms.config_parts import ActorConfig, DataPathConfig, RunConfig
from rlf.replay import PrioritizedSampler


def test_every_setting_belongs_to_one_part_with_the_same_default():
    params = inspect.signature(TrainerConfig.__init__).parameters
    settings = {n: p.default for n, p in params.items() if n != "self" and n not in _REMOVED}
    owners = {}
    for name, cls in _PARTS:
        for f in dataclasses.fields(cls):
            assert f.name not in owners, f"{f.name} is in {owners.get(f.name)} and {name}"
            owners[f.name] = name
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            if settings[f.name] is None and f.default_factory is not dataclasses.MISSING:
                continue  # ray_actor_resources: None in gin, {} in the part
            assert default == settings[f.name], f.name
    assert set(owners) == set(settings)


def test_the_flat_names_read_through_and_the_config_is_frozen():
    config = TrainerConfig(unroll_length=16, mini_batch_size=4, num_iterations=3)
    assert config.unroll_length == config.data_path.unroll_length == 16
    assert config.num_iterations == config.run.num_iterations == 3
    assert isinstance(config.actors, ActorConfig) and config.deterministic
    with pytest.raises(AttributeError, match=r"TrainerConfig is frozen: it cannot set "
                                             r"'initial_collect_steps'.*config.replace"):
        config.initial_collect_steps = 100
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.data_path.initial_collect_steps = 100
    with pytest.raises(AttributeError, match="TrainerConfig has no setting 'unrol_length'"):
        config.unrol_length  # noqa: B018
    changed = config.replace(initial_collect_steps=100)
    assert (changed.initial_collect_steps, config.initial_collect_steps) == (100, 0)
    assert changed.mini_batch_size == 4
    with pytest.raises(ValueError, match="TrainerConfig.initial_collect_steps must be >= 0"):
        config.replace(initial_collect_steps=-1)
    with pytest.raises(ValueError, match="TrainerConfig has no setting unrol_length"):
        config.replace(unrol_length=1)
    assert pickle.loads(pickle.dumps(config)).as_dict() == config.as_dict()


@pytest.mark.parametrize("part, kwargs, message", [
    (RunConfig, dict(random_seed=-1), r"random_seed must be in \[0, 2\*\*30\)"),
    (RunConfig, dict(num_iterations=0), "set num_iterations or num_env_steps"),
    (DataPathConfig, dict(mini_batch_length=0), "mini_batch_length must be >= 1 or None"),
    (DataPathConfig, dict(offline_fraction=0.2), "offline_fraction = 0.2 takes effect only "
                                                 "with offline data"),
    (DataPathConfig, dict(priority_replay_alpha=0.9, priority_replay_beta=0.6),
     "priority_replay_alpha = 0.9, priority_replay_beta = 0.6 take effect only with "
     "TrainerConfig.priority_replay: set TrainerConfig.priority_replay = True too, or "
     "remove them"),
    (DataPathConfig, dict(priority_replay_alpha=0.9, replay_sampler=PrioritizedSampler(0.6)),
     "priority_replay_alpha = 0.9 takes effect only with TrainerConfig.priority_replay: a "
     "replay_sampler takes its own exponents; remove it"),
    (ActorConfig, dict(num_actors=2), "num_actors = 2 takes effect only with actors"),
    (ActorConfig, dict(async_unroll=True, ray_address="auto"),
     "ray_address = 'auto' takes effect only with Ray actors"),
    (ActorConfig, dict(async_unroll=True, max_actor_restarts=1, actor_restart_window=60.0),
     r"max_actor_restarts = 1, actor_restart_window = 60.0 take effect only with "
     r"restart_failed_actors \(a failed actor stops the run\): set "
     r"TrainerConfig.restart_failed_actors = True too, or remove them"),
    (ActorConfig, dict(async_unroll=True, use_ray=True, actor_niceness=0),
     r"actor_niceness = 0 takes effect only with actor processes \(Ray starts its workers "
     r"at its own niceness\): remove it, or set TrainerConfig.use_ray = False"),
])
def test_each_part_refuses_its_own_settings_when_built(part, kwargs, message):
    with pytest.raises(ValueError, match=message):
        part(**kwargs)
    with pytest.raises(ValueError, match=message):  # the same line through the gin face
        TrainerConfig(**kwargs)


def test_a_check_across_parts_is_made_once_the_parts_are_built():
    with pytest.raises(ValueError, match="unroll_length = 0 takes no environment step"):
        TrainerConfig(unroll_length=0, offline_buffer_dir="x.pt", num_iterations=0,
                      num_env_steps=100)


def test_offline_files_are_read_as_a_shell_would(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RLF_DATA", str(tmp_path / "data"))
    assert DataPathConfig(unroll_length=0, offline_buffer_dir="~/a.pt").offline_buffer_dir == \
        str(tmp_path / "a.pt")
    assert DataPathConfig(unroll_length=0, offline_buffer_dir=["$RLF_DATA/b.pt"]
                          ).offline_buffer_dir == [str(tmp_path / "data" / "b.pt")]
    monkeypatch.delenv("RLF_DATA")
    with pytest.raises(ValueError, match=r"TrainerConfig.offline_buffer_dir \$RLF_DATA/b.pt: "
                                         r"the environment variable RLF_DATA is not set"):
        DataPathConfig(unroll_length=0, offline_buffer_dir="$RLF_DATA/b.pt")


def test_evaluation_settings_without_evaluate_are_refused_unless_it_switches_them_off():
    # A conf that sets them and forgets evaluate = True evaluated nothing; a conf's evaluation
    # switched off with evaluate = False (on the command line) is not refused.
    with pytest.raises(ValueError, match=r"^TrainerConfig: eval_interval = 50, "
                                         r"num_eval_episodes = 3 take effect only with "
                                         r"evaluation: set TrainerConfig.evaluate = True too, "
                                         r"or remove them"):
        TrainerConfig(eval_interval=50, num_eval_episodes=3)
    with pytest.raises(ValueError, match="num_eval_environments = 2 takes effect only"):
        TrainerConfig(num_eval_environments=2)
    TrainerConfig(evaluate=True, eval_interval=50, num_eval_environments=2)
    off = TrainerConfig(evaluate=False, eval_interval=50)
    assert off.replace(unroll_length=3).eval_interval == 50  # replace passes evaluate on
    with pytest.raises(ValueError, match="eval_video_interval = 2 takes effect only with "
                                         "evaluation"):
        TrainerConfig(evaluate=False, eval_video_interval=2)
