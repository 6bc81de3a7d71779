"""The command line's grids and samples, and a trial's values as gin bindings."""

import gin
import pytest

from rlf.trainers.gin_config import parse_config, query
from rlf.experiments.space import (SearchSpace, gin_value, parse_grid, parse_sample,
                                   short_name, trial_bindings)
from rlf.utils.errors import UserError


def test_grids_and_samples_parse_into_bindings_gin_reads_back():
    space = SearchSpace.from_flags(
        grids=["torch.optim.Adam.lr=[1e-3, 3e-4]", "PPOAlgorithm.optimizer=[@torch.optim.Adam]"],
        samples=["PPOAlgorithm.gamma=uniform(0.9, 0.999)"], seeds=[0, 1], games=["Pong"])
    assert space.grid["torch.optim.Adam.lr"] == [1e-3, 3e-4]
    assert space.grid["load.env_name"] == ["ALE/Pong-v5"]
    assert space.grid["TrainerConfig.random_seed"] == [0, 1]
    assert space.sample["PPOAlgorithm.gamma"] == ("uniform", (0.9, 0.999))
    assert space.num_trials(3) == 2 * 1 * 2 * 1 * 3
    config = {"torch.optim.Adam.lr": 3e-4, "PPOAlgorithm.optimizer": "@torch.optim.Adam",
              "PPOAlgorithm.gamma": 0.95, "TrainerConfig.random_seed": 1,
              "load.env_name": "ALE/Pong-v5"}
    bindings = trial_bindings(config, space.keys)
    assert "PPOAlgorithm.optimizer=@torch.optim.Adam" in bindings
    assert "load.env_name='ALE/Pong-v5'" in bindings
    gin.clear_config()
    parse_config("confs/ppo_cartpole.gin", bindings)
    assert query("torch.optim.Adam.lr", None) == 3e-4
    assert query("PPOAlgorithm.gamma", None) == 0.95
    assert query("TrainerConfig.random_seed", None) == 1
    assert short_name(config, space.keys) == \
        "lr=0.0003_optimizer=torch.optim.Adam_Pong_seed1_gamma=0.95"
    gin.clear_config()


def test_numpy_values_from_tunes_samplers_are_written_as_python_numbers():
    np = pytest.importorskip("numpy")
    assert gin_value(np.float64(0.25)) == "0.25"
    assert gin_value(np.int64(3)) == "3"
    assert gin_value((1, "a")) == "(1, 'a')"
    assert gin_value("%GAMMA") == "%GAMMA"


@pytest.mark.parametrize("flag, text, message", [
    ("grid", "lr=[1, 2]", "expected 'Configurable.param=...'"),
    ("grid", "Adam.lr=1e-3", "give a non-empty list in brackets"),
    ("grid", "Adam.lr=[]", "give a non-empty list in brackets"),
    ("grid", "Adam.lr=[1, 1]", "a value is given twice"),
    ("grid", "Adam.lr=[1e-3, oops]", "is not a value"),
    ("sample", "Adam.lr=normal(0, 1)", "expected one of uniform(...)"),
    ("sample", "Adam.lr=loguniform(0, 1)", "give numbers low < high (both > 0)"),
    ("sample", "Adam.lr=uniform(2, 1)", "give numbers low < high"),
    ("sample", "Adam.lr=uniform(1)", "uniform takes 2 argument(s)"),
])
def test_a_malformed_grid_or_sample_is_one_line(flag, text, message):
    parse = parse_grid if flag == "grid" else parse_sample
    with pytest.raises(UserError) as e:
        parse(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_binding_varied_twice_is_refused():
    with pytest.raises(UserError, match="TrainerConfig.random_seed is already varied by "
                                        "--grid"):
        SearchSpace.from_flags(grids=["TrainerConfig.random_seed=[1, 2]"], seeds=[0])


@pytest.mark.parametrize("kw, message", [
    (dict(scheduler="asha"), "--scheduler asha ranks trials by a metric: give --metric"),
    (dict(scheduler="pbt", metric="AverageReturn"),
     "--scheduler pbt explores the --sample values: give at least one"),
    (dict(scheduler="pbt", metric="AverageReturn", perturbation_interval=5, checkpoint_every=2,
          space=SearchSpace.from_flags(samples=["torch.optim.Adam.lr=uniform(1e-4, 1e-3)"])),
     "--checkpoint_every 2 does not divide --perturbation_interval 5: PBT needs a checkpoint "
     "at every perturbation"),
    (dict(space=SearchSpace.from_flags(grids=["torch.optim.Adam.lr=[1e-4]"],
                                       samples=["torch.optim.Adam.lr=uniform(1e-4, 1e-3)"])),
     "torch.optim.Adam.lr has a --grid and a --sample"),
    (dict(num_samples=3), "--num_samples 3 repeats the same trials without --sample"),
    (dict(num_cpus=4, address="10.0.0.1:6379"),
     "--num_cpus 4 sets the CPUs of a local Ray and does nothing with --address"),
    (dict(space=SearchSpace.from_flags(grids=["PPOAlgorithm.gama=[0.9, 0.99]"])),
     "PPOAlgorithm has no parameter 'gama' (closest: gamma"),
    (dict(space=SearchSpace.from_flags(grids=["torch.optim.Adam.lr=[1e-3, 'fast']"])),
     "torch.optim.Adam.lr"),
])
def test_an_experiments_mistake_is_one_line_before_any_trial(kw, message):
    pytest.importorskip("ray.tune", reason="rlf.experiments.runner needs the tune extra")
    from rlf.experiments.runner import ExperimentOptions, check_options
    options = ExperimentOptions(conf="confs/ppo_cartpole.gin", root_dir="unused", **kw)
    with pytest.raises(UserError) as e:
        check_options(options)
    assert message in str(e.value) and "\n" not in str(e.value)
    gin.clear_config()


def test_ray_address_names_the_cluster_where_no_address_is_given(monkeypatch):
    pytest.importorskip("ray.tune", reason="rlf.experiments.runner needs the tune extra")
    from rlf.experiments.runner import ExperimentOptions, check_options
    from rlf.utils.ray_address import resolve_ray_address
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_ray_address(None) is None and resolve_ray_address("local") is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert resolve_ray_address(None) == "10.0.0.1:6379"
    assert resolve_ray_address("10.0.0.2:6379") == "10.0.0.2:6379"
    assert resolve_ray_address("local") is None
    options = ExperimentOptions(conf="confs/ppo_cartpole.gin", root_dir="unused", num_cpus=4)
    with pytest.raises(UserError, match=r"^--num_cpus 4 sets the CPUs of a local Ray and does "
                                        r"nothing with RAY_ADDRESS \(the cluster it names\)"):
        check_options(options)
    gin.clear_config()
    monkeypatch.setenv("RAY_ADDRESS", "local")
    check_options(options)
    gin.clear_config()


def test_a_trials_actors_count_in_its_resources():
    pytest.importorskip("ray.tune")
    from rlf.algorithms import TrainerConfig
    from rlf.experiments.runner import trial_resources
    assert trial_resources(TrainerConfig()).bundles == [{"CPU": 1}]
    processes = TrainerConfig(async_unroll=True, num_actors=3, unroll_length=4)
    assert trial_resources(processes).bundles == [{"CPU": 4}]
    ray_actors = TrainerConfig(async_unroll=True, num_actors=2, unroll_length=4, use_ray=True,
                               ray_num_cpus_per_actor=0.5)
    assert trial_resources(ray_actors).bundles == [{"CPU": 1}, {"CPU": 0.5}, {"CPU": 0.5}]


def test_an_experiment_restarted_with_other_settings_is_refused_and_left_alone(tmp_path):
    pytest.importorskip("ray.tune")
    from rlf.experiments.runner import (SETTINGS_FILE, TUNE_DIR, ExperimentOptions,
                                        _check_restart, run_experiment)
    first = ExperimentOptions(conf="confs/ppo_cartpole.gin", root_dir=str(tmp_path),
                              space=SearchSpace.from_flags(seeds=[0, 1]))
    (tmp_path / SETTINGS_FILE).write_text(__import__("json").dumps(first.settings()))
    # an experiment that never began (no Tune state) holds nothing to resume: not refused
    _check_restart(tmp_path, other_settings := ExperimentOptions(
        conf="confs/ppo_cartpole.gin", root_dir=str(tmp_path),
        space=SearchSpace.from_flags(seeds=[0, 1, 2])).settings())
    assert other_settings != first.settings()
    (tmp_path / TUNE_DIR).mkdir()
    (tmp_path / TUNE_DIR / "tuner.pkl").write_bytes(b"")  # Tune's state: it began
    before = (tmp_path / SETTINGS_FILE).read_text()
    other = ExperimentOptions(conf="confs/ppo_cartpole.gin", root_dir=str(tmp_path),
                              space=SearchSpace.from_flags(seeds=[0, 1, 2]))
    with pytest.raises(UserError) as e:
        run_experiment(other)
    assert str(e.value).startswith(f"{tmp_path} holds an experiment started with other "
                                   f"settings (space: ")
    assert str(e.value).endswith("give the same command to resume it, or another --root_dir")
    assert (tmp_path / SETTINGS_FILE).read_text() == before
    gin.clear_config()
