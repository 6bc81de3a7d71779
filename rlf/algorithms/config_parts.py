"""The typed parts of ``TrainerConfig``: frozen dataclasses, each validating its own fields
(``__post_init__``). The settings are declared and documented here only: ``TrainerConfig``'s
gin signature is generated from them, and each consumer reads its part.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from rlf.utils.paths import expand_path

__all__ = ["RunConfig", "DataPathConfig", "ActorConfig", "EvaluationConfig", "CheckpointConfig",
           "SummaryConfig", "changed_fields", "without_effect", "RANDOM_SEED_LIMIT"]

# Seeds lie below this, leaving room for the offsets of the environments' seeds (evaluation:
# + 1,000,003) within ALE's int32 seeds.
RANDOM_SEED_LIMIT = 2 ** 30


def _set(part, name: str, value: Any) -> None:
    """Normalises a field of a frozen part while it is validated."""
    object.__setattr__(part, name, value)


def _at_least(part, minimum: int, names: Sequence[str], none: Optional[str] = None) -> None:
    """Refuses a field below ``minimum`` (``none``: what None means, if None is allowed)."""
    for name in names:
        value = getattr(part, name)
        if value is None and none is not None:
            continue
        if value < minimum:
            allowed = f" or None ({none})" if none is not None else ""
            raise ValueError(f"TrainerConfig.{name} must be >= {minimum}{allowed}, got {value}")


def _positive_ints(part, names: Sequence[str]) -> None:
    """Refuses any of ``names`` below 1 and stores each as an ``int``."""
    _at_least(part, 1, names)
    for name in names:
        _set(part, name, int(getattr(part, name)))


def changed_fields(part, names: Sequence[str]) -> List[str]:
    """``["name = value", ...]`` for those of ``names`` (fields of ``part``) whose value is not
    the field's default, in the order of ``names``."""
    defaults = {f.name: f.default for f in dataclasses.fields(part)}
    return [f"{n} = {getattr(part, n)!r}" for n in names if getattr(part, n) != defaults[n]]


def without_effect(settings: Sequence[str], where: str, fix: str,
                   owner: str = "TrainerConfig") -> str:
    """The message for ``owner``'s ``settings`` (``"name = value"`` entries, as
    ``changed_fields`` gives them) that take effect only ``where`` another setting is: ``fix``
    ends it, ``{it}`` standing for them."""
    verb, it = ("takes", "it") if len(settings) == 1 else ("take", "them")
    return f"{owner}: {', '.join(settings)} {verb} effect only {where}: {fix.format(it=it)}"


@dataclass(frozen=True)
class RunConfig:
    """What the run is: where it writes, what it trains, its seed, its budget, its process
    and its device.

    Attributes:
        root_dir: where ``config.gin``, ``train/`` and ``ckpt/`` go (``--root_dir`` wins).
        algorithm_ctor: builds the root ``RLAlgorithm`` from ``observation_spec``,
            ``action_spec``, ``reward_spec``, ``env`` and ``config``.
        random_seed: seeds Python, numpy, torch and the environments (``random_seed + i``;
            evaluation ``+ 1000003 + i``), in ``[0, 2**30)``; None picks one and logs it.
        torch_num_threads: ``torch.set_num_threads`` for the learner; None leaves torch's
            default (one per core).
        flush_denormal: ``torch.set_flush_denormal(True)`` in learner and actors: optimizer
            moments that decay into denormals are many times slower on x86 CPUs
            (``bench/denormal_optimizer_step.py``).
        reuse_freed_memory: glibc's malloc keeps freed memory for reuse in the learner
            instead of unmapping and page-faulting it again (``bench/malloc_reuse.py``).
        num_iterations: number of ``train_iter`` calls; 0 means no limit (then
            ``num_env_steps`` must be set).
        num_env_steps: stop unrolling when ``EnvironmentSteps`` reaches this; 0 for no
            limit.
        device: where the parameters live (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``).
        enable_amp: ``torch.autocast`` in rollout and loss (bfloat16 on CPU, float16 on CUDA
            with a ``GradScaler``).
        empty_cache: ``torch.cuda.empty_cache()`` every iteration.
        num_learners: data-parallel learner processes (``torch.distributed``; ``rlf.bin.train``
            or ``torchrun`` starts them), which train as one learner would
            (docs/distributed.md): learner ``r`` runs ``1/N`` of the environments and
            actors; ``load.num_envs``, ``num_actors`` and an epoch path's ``mini_batch_size``
            must be multiples of ``N``. Rank 0 writes summaries, checkpoints and
            ``config.gin``; rank ``r > 0`` its own state in ``ckpt/learner-<r>/``.

    Raises:
        ValueError: for a value out of range, both budgets 0, or a device torch or this
            machine does not have.
    """

    root_dir: Optional[str] = None
    algorithm_ctor: Optional[Callable] = None
    random_seed: Optional[int] = None
    torch_num_threads: Optional[int] = None
    flush_denormal: bool = True
    reuse_freed_memory: bool = True
    num_iterations: int = 1000
    num_env_steps: int = 0
    device: str = "cpu"
    enable_amp: bool = False
    empty_cache: bool = False
    num_learners: int = 1

    def __post_init__(self):
        seed = self.random_seed
        if seed is not None and not 0 <= seed < RANDOM_SEED_LIMIT:
            raise ValueError(f"TrainerConfig.random_seed must be in [0, 2**30) or None, got "
                             f"{seed}")
        if self.num_iterations < 0 or self.num_env_steps < 0:
            raise ValueError(f"TrainerConfig: num_iterations ({self.num_iterations}) and "
                             f"num_env_steps ({self.num_env_steps}) must be >= 0")
        if self.num_iterations == 0 and self.num_env_steps == 0:
            raise ValueError("TrainerConfig: set num_iterations or num_env_steps (both are 0, "
                             "so training would never stop)")
        _set(self, "num_iterations", int(self.num_iterations))
        _set(self, "num_env_steps", int(self.num_env_steps))
        _at_least(self, 1, ["torch_num_threads"], none="torch's default")
        _at_least(self, 1, ["num_learners"])
        _check_device(self.device)


def _check_device(device: str) -> None:
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        raise ValueError(f"TrainerConfig.device = {device!r} is not a torch device (e.g. "
                         f"'cpu', 'cuda', 'cuda:1')") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"TrainerConfig.device = {device!r}, but torch sees no CUDA device "
                         f"on this machine; use device='cpu'")
    index = torch.device(device).index
    if kind == "cuda" and index is not None and index >= torch.cuda.device_count():
        raise ValueError(f"TrainerConfig.device = {device!r}, but torch sees "
                         f"{torch.cuda.device_count()} CUDA device(s) (cuda:0 ...)")
    mps = getattr(torch.backends, "mps", None)
    if kind not in ("cpu", "cuda") and not (
            kind == "mps" and mps is not None and mps.is_available()):
        raise ValueError(f"TrainerConfig.device = {device!r}: rlf trains on 'cpu' or "
                         f"'cuda' (or 'mps' where torch has it)")


def _check_sampler(sampler: Any, priority_replay: bool) -> None:
    """Refuses a ``replay_sampler`` that is no sampler, or one beside ``priority_replay``."""
    from rlf.replay.samplers import Sampler
    if not isinstance(sampler, Sampler):
        raise ValueError(f"TrainerConfig.replay_sampler must be a rlf.replay Sampler (gin: "
                         f"@UniformSampler(), @PrioritizedSampler(), @HindsightSampler()), "
                         f"got {sampler!r}")
    if priority_replay:
        raise ValueError(f"TrainerConfig.priority_replay = True and replay_sampler = "
                         f"{type(sampler).__name__} are both set; give a PrioritizedSampler "
                         f"as the sampler (HindsightSampler.sampler = @PrioritizedSampler()) "
                         f"and remove priority_replay")


@dataclass(frozen=True)
class DataPathConfig:
    """How experience reaches the updates (``make_data_path`` alone reads it).

    Attributes:
        unroll_length: steps per environment per iteration (``T``); may be fractional for
            off-policy algorithms (e.g. 0.25 unrolls one step every 4 iterations); 0 trains
            only on ``offline_buffer_dir``'s data, for ``num_iterations``.
        unroll_with_grad: keep the autograd graph of ``rollout_step`` (off-policy only;
            on-policy paths decide it).
        use_rollout_state: start ``train_step``'s recurrent state on a stored sequence from
            the rollout state stored with its first step instead of zeros.
        burn_in_steps: the first ``k`` steps of each trained sequence only warm up the
            recurrent state, without gradient; ``calc_loss`` sees the ``[T-k, B]`` rest
            (R2D2's burn-in, Kapturowski et al. 2019).
        temporally_independent_train_step: call ``train_step`` once on ``[T*B]`` instead of
            ``T`` times on ``[B]``; only valid without recurrent train state.
        mini_batch_size: sequences per gradient update in off-policy training.
        mini_batch_length: steps per sequence.
        num_updates_per_train_iter: passes over the sampled (or gathered) data per
            iteration.
        whole_replay_buffer_training: train on everything in the buffer each iteration
            (shuffled into mini-batches) instead of sampling.
        clear_replay_buffer: with whole-buffer training, keep only the last unroll (and its
            preceding step); otherwise clear the buffer after each iteration.
        replay_buffer_length: steps held per environment.
        priority_replay: proportional prioritised replay.
        priority_replay_alpha: priority exponent.
        priority_replay_beta: importance-sampling exponent.
        replay_sampler: the online buffer's ``rlf.replay.Sampler`` (gin:
            ``@HindsightSampler()``); None: ``PrioritizedSampler(priority_replay_alpha,
            priority_replay_beta)`` with ``priority_replay``, else ``UniformSampler()``.
        initial_collect_steps: steps (all environments) in the buffer before training
            starts; sampled training also waits for a whole sequence.
        update_counter_every_mini_batch: advance the global counter per mini-batch instead
            of per iteration.
        offline_buffer_dir: replay files (rlf's or ALF's) for offline (``unroll_length =
            0``) or hybrid training of off-policy algorithms.
        offline_buffer_length: the oldest steps per environment taken from each; all if None.
        offline_normalized_actions: True: the files' bounded actions are in [-1, 1] (ALF's)
            and are rescaled to the spec's bounds; False: in the spec's units; None: as
            False, refusing a file whose actions all lie in [-1, 1] as probably normalised.
        offline_fraction: in hybrid training, the offline share of each batch.

    Raises:
        ValueError: for a value out of range, an ``offline_*`` setting without
            ``offline_buffer_dir``, or a priority exponent without ``priority_replay``.
    """

    #: The replay buffer's settings, which only off-policy algorithms have.
    REPLAY_SETTINGS = ("whole_replay_buffer_training", "clear_replay_buffer",
                       "replay_buffer_length", "priority_replay", "priority_replay_alpha",
                       "priority_replay_beta", "replay_sampler", "initial_collect_steps")

    unroll_length: float = 8
    unroll_with_grad: bool = False
    use_rollout_state: bool = False
    burn_in_steps: int = 0
    temporally_independent_train_step: Optional[bool] = None
    mini_batch_size: Optional[int] = None
    mini_batch_length: Optional[int] = None
    num_updates_per_train_iter: int = 1
    whole_replay_buffer_training: bool = False
    clear_replay_buffer: bool = False
    replay_buffer_length: int = 1024
    priority_replay: bool = False
    priority_replay_alpha: float = 0.7
    priority_replay_beta: float = 0.4
    replay_sampler: Optional[Any] = None
    initial_collect_steps: int = 0
    update_counter_every_mini_batch: bool = False
    offline_buffer_dir: Optional[Union[str, List[str]]] = None
    offline_buffer_length: Optional[int] = None
    offline_normalized_actions: Optional[bool] = None
    offline_fraction: float = 0.5

    def __post_init__(self):
        for name in ("unroll_length", "initial_collect_steps", "burn_in_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainerConfig.{name} must be >= 0, got "
                                 f"{getattr(self, name)}")
        if self.unroll_length == 0 and not self.offline_buffer_dir:
            raise ValueError("TrainerConfig.unroll_length = 0 collects no experience and "
                             "trains only on offline data: set TrainerConfig."
                             "offline_buffer_dir, or an unroll_length > 0")
        _at_least(self, 1, ["num_updates_per_train_iter", "replay_buffer_length"])
        _at_least(self, 1, ["mini_batch_size", "mini_batch_length"], none="all")
        for name in ("burn_in_steps", "num_updates_per_train_iter", "replay_buffer_length",
                     "initial_collect_steps"):
            _set(self, name, int(getattr(self, name)))
        if self.priority_replay_alpha < 0 or not 0 <= self.priority_replay_beta <= 1:
            raise ValueError(f"TrainerConfig: priority_replay_alpha must be >= 0 (got "
                             f"{self.priority_replay_alpha}) and priority_replay_beta in "
                             f"[0, 1] (got {self.priority_replay_beta})")
        if self.replay_sampler is not None:
            _check_sampler(self.replay_sampler, self.priority_replay)
        exponents = changed_fields(self, ("priority_replay_alpha", "priority_replay_beta"))
        if exponents and not self.priority_replay:
            raise ValueError(without_effect(
                exponents, "with TrainerConfig.priority_replay",
                "set TrainerConfig.priority_replay = True too, or remove {it}"
                if self.replay_sampler is None else
                "a replay_sampler takes its own exponents; remove {it}"))
        if not 0.0 <= self.offline_fraction < 1.0:
            raise ValueError(f"TrainerConfig.offline_fraction must be in [0, 1), got "
                             f"{self.offline_fraction}")
        if self.offline_buffer_dir:  # '~' and $VARS as a shell would read them
            what, given = "TrainerConfig.offline_buffer_dir", self.offline_buffer_dir
            _set(self, "offline_buffer_dir",
                 expand_path(given, what) if isinstance(given, (str, os.PathLike))
                 else [expand_path(p, what) for p in given])
        if not self.offline_buffer_dir:
            offline_only = changed_fields(self, ("offline_buffer_length",
                                                 "offline_normalized_actions",
                                                 "offline_fraction"))
            if offline_only:
                raise ValueError(without_effect(
                    offline_only, "with offline data",
                    "set TrainerConfig.offline_buffer_dir too, or remove {it}"))


@dataclass(frozen=True)
class ActorConfig:
    """Who acts: the actors of ``async_unroll``, their failures, and the reproducible mode.

    Attributes:
        async_unroll: unroll in ``num_actors`` actor processes (``AsyncUnroller``), each
            with its own copy of the environment (so ``num_actors * load.num_envs`` in all),
            while the learner trains; needs an off-policy algorithm.
        num_actors: actors for ``async_unroll``.
        unroll_queue_size: capacity of the async experience queue, in unrolls (small: every
            queued unroll adds policy lag).
        unroll_parameter_update_period: iterations between parameter broadcasts to actors.
        deterministic: make the run a function of ``random_seed`` and the thread count on
            a given machine: ``torch.use_deterministic_algorithms`` and, with actors, a fixed
            policy lag: actor unroll ``k`` acts with the parameters after update ``k -
            policy_lag`` (cleanba's scheme, Huang et al. 2023). False: free-running actors
            act with the newest parameters they have.
        policy_lag: ``L`` of ``deterministic`` actors (>= 0; 0 acts with the parameters of
            the update just finished, so actors and learner take turns).
        restart_failed_actors: restart an actor that raised or died instead of stopping
            (logged, and counted in ``async_unroll/actor_restarts``).
        max_actor_restarts: the restarts allowed within ``actor_restart_window`` seconds;
            one more failure stops the run, with a checkpoint.
        actor_restart_window: see ``max_actor_restarts`` (seconds).
        actor_niceness: actor processes run this many nice levels below the learner, the
            bottleneck where they share cores (``bench/async_throughput.py``); Ray's workers
            keep Ray's.
        use_ray: run the actors of ``async_unroll`` (which it needs) as Ray actors
            (``RayUnroller``) instead of processes.
        ray_address: the Ray cluster to join (``ray.init(address=...)``, ``'auto'`` for
            the one ``ray start`` started on this machine); None joins the cluster of
            ``RAY_ADDRESS`` if set, else starts a local one. Only with ``use_ray``.
        ray_num_cpus_per_actor: Ray CPU resources each actor reserves.
        ray_actor_resources: custom Ray resources each actor reserves (``{"rlf_actor":
            1}``: only nodes started with that resource run actors).

    Raises:
        ValueError: for a value out of range, deterministic actors with a parameter update
            period other than 1, an actor (Ray) setting without ``async_unroll``
            (``use_ray``), the restart budget without ``restart_failed_actors``, or
            ``actor_niceness`` with ``use_ray``.
    """

    #: Settings of the actors of ``async_unroll``, which a run without actors ignores.
    ACTOR_SETTINGS = ("num_actors", "unroll_queue_size", "unroll_parameter_update_period",
                      "policy_lag", "restart_failed_actors", "max_actor_restarts",
                      "actor_restart_window", "actor_niceness")

    async_unroll: bool = False
    num_actors: int = 1
    unroll_queue_size: int = 1
    unroll_parameter_update_period: int = 1
    deterministic: bool = True
    policy_lag: int = 1
    restart_failed_actors: bool = False
    max_actor_restarts: int = 3
    actor_restart_window: float = 600.0
    actor_niceness: int = 5
    use_ray: bool = False
    ray_address: Optional[str] = None
    ray_num_cpus_per_actor: float = 1.0
    ray_actor_resources: Optional[Dict[str, Any]] = None

    def __post_init__(self):
        if self.use_ray and not self.async_unroll:
            raise ValueError("TrainerConfig.use_ray runs the actors of async_unroll: set "
                             "TrainerConfig.async_unroll = True as well")
        _positive_ints(self, ("unroll_queue_size", "num_actors",
                              "unroll_parameter_update_period"))
        self._check_policy_lag()
        self._check_restarts_and_niceness()
        if not self.async_unroll:
            for_actors = changed_fields(self, self.ACTOR_SETTINGS)
            if for_actors:
                raise ValueError(without_effect(
                    for_actors, "with actors",
                    "set TrainerConfig.async_unroll = True too, or remove {it}"))
        self._check_ray_resources()

    def _check_policy_lag(self) -> None:
        """``policy_lag``: an integer >= 0, with reproducible actors only, which need a
        broadcast after every update."""
        lag = self.policy_lag
        if lag != int(lag) or lag < 0:
            raise ValueError(f"TrainerConfig.policy_lag must be an integer >= 0, got {lag}")
        _set(self, "policy_lag", int(lag))
        if (self.deterministic and self.async_unroll
                and self.unroll_parameter_update_period != 1):
            raise ValueError(f"TrainerConfig.deterministic actors act with the parameters of "
                             f"update k - policy_lag, which needs a broadcast after every "
                             f"update: set unroll_parameter_update_period = 1 (it is "
                             f"{self.unroll_parameter_update_period}), or deterministic = "
                             f"False for free-running actors")
        if self.async_unroll and not self.deterministic and self.policy_lag != 1:
            raise ValueError(without_effect(
                [f"policy_lag = {self.policy_lag}"], "with deterministic = True",
                "set TrainerConfig.deterministic = True too, or remove {it}"))

    def _check_restarts_and_niceness(self) -> None:
        """The restart budget (with ``restart_failed_actors`` only) and the actors'
        niceness (of processes only)."""
        if self.max_actor_restarts < 0 or self.actor_restart_window <= 0:
            raise ValueError(f"TrainerConfig.max_actor_restarts must be >= 0 (got "
                             f"{self.max_actor_restarts}) and actor_restart_window > 0 (got "
                             f"{self.actor_restart_window})")
        _set(self, "max_actor_restarts", int(self.max_actor_restarts))
        _set(self, "actor_restart_window", float(self.actor_restart_window))
        niceness = self.actor_niceness
        if niceness != int(niceness) or niceness < 0:
            raise ValueError(f"TrainerConfig.actor_niceness must be an integer >= 0 (actors "
                             f"can only be given a lower priority than the learner), got "
                             f"{niceness}")
        _set(self, "actor_niceness", int(niceness))
        if not self.async_unroll:  # (every actor setting is refused then)
            return
        budget = changed_fields(self, ("max_actor_restarts", "actor_restart_window"))
        if budget and not self.restart_failed_actors:
            raise ValueError(without_effect(
                budget, "with restart_failed_actors (a failed actor stops the run)",
                "set TrainerConfig.restart_failed_actors = True too, or remove {it}"))
        niceness_set = changed_fields(self, ("actor_niceness",))
        if self.use_ray and niceness_set:
            raise ValueError(without_effect(
                niceness_set, "with actor processes (Ray starts its "
                "workers at its own niceness)", "remove {it}, or set "
                "TrainerConfig.use_ray = False"))

    def _check_ray_resources(self) -> None:
        """Ray's resources per actor: numbers >= 0, set only with Ray actors."""
        _set(self, "ray_num_cpus_per_actor", float(self.ray_num_cpus_per_actor))
        actor_resources = dict(self.ray_actor_resources or {})
        _set(self, "ray_actor_resources", actor_resources)
        resources = {"num_cpus": self.ray_num_cpus_per_actor, **actor_resources}
        bad = {k: v for k, v in resources.items()
               if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0}
        if bad:
            raise ValueError(f"TrainerConfig: Ray resources per actor must be numbers >= 0 "
                             f"(ray_num_cpus_per_actor, ray_actor_resources), got {bad}")
        if not self.use_ray:
            ray_only = changed_fields(self, ("ray_address", "ray_num_cpus_per_actor")) + (
                [f"ray_actor_resources = {self.ray_actor_resources!r}"]
                if self.ray_actor_resources else [])
            if ray_only:
                raise ValueError(without_effect(
                    ray_only, "with Ray actors",
                    "set TrainerConfig.use_ray = True (and async_unroll = True) too, or "
                    "remove {it}"))


@dataclass(frozen=True)
class EvaluationConfig:
    """Evaluations with ``predict_step`` on a separate environment.

    Attributes:
        evaluate: evaluate with ``predict_step`` on a separate environment.
        eval_interval: evaluate every this many iterations, and once more after the last
            iteration of a run that reaches its budget between two evaluations.
        num_eval_episodes: episodes per evaluation.
        num_eval_environments: parallel environments of the evaluation environment; each
            plays an equal share of ``num_eval_episodes`` (so short episodes are not
            favoured).
        eval_video_interval: record the first episode of every this many evaluations (those
            at iterations ``k * eval_interval`` with ``k`` a multiple of it) as
            ``root_dir/videos/eval-<iteration>.mp4`` and TensorBoard's ``Eval/video``: the
            frames gymnasium renders, Atari's 84x84 frames; 0: none.

    Raises:
        ValueError: for ``eval_interval``, ``num_eval_episodes`` or ``num_eval_environments``
            below 1, a negative ``eval_video_interval``, or one without ``evaluate``.
    """

    evaluate: bool = False
    eval_interval: int = 100
    num_eval_episodes: int = 10
    num_eval_environments: int = 1
    eval_video_interval: int = 0

    def __post_init__(self):
        _positive_ints(self, ("eval_interval", "num_eval_episodes", "num_eval_environments"))
        if self.eval_video_interval < 0:
            raise ValueError(f"TrainerConfig.eval_video_interval must be >= 0 (0: no video), "
                             f"got {self.eval_video_interval}")
        if self.eval_video_interval and not self.evaluate:
            raise ValueError(without_effect([f"eval_video_interval = "
                                             f"{self.eval_video_interval}"], "with evaluation",
                                            "set TrainerConfig.evaluate = True too, or remove "
                                            "{it}"))


@dataclass(frozen=True)
class CheckpointConfig:
    """What is checkpointed, and how often.

    Attributes:
        checkpoint_interval: write a checkpoint every this many iterations (and at the end).
        num_checkpoints: newest checkpoints kept.
        save_replay_buffer: checkpoints carry the replay buffer (in a separate file
            ``ckpt/replay_buffer-<step>.pt``, ALF's layout) and resuming restores it.

    Raises:
        ValueError: for ``checkpoint_interval`` or ``num_checkpoints`` below 1.
    """

    checkpoint_interval: int = 1000
    num_checkpoints: int = 3
    save_replay_buffer: bool = False

    def __post_init__(self):
        _positive_ints(self, ("checkpoint_interval", "num_checkpoints"))


@dataclass(frozen=True)
class SummaryConfig:
    """What TensorBoard receives, and how often; the metrics' window; the experiment tracker
    that mirrors the scalars.

    Attributes:
        summary_interval: record summaries every this many iterations (the training
            summaries of such an iteration describe its last mini-batch).
        summaries_flush_secs: seconds between TensorBoard flushes.
        summarize_grads_and_vars: histograms and norms of every gradient and parameter.
        summarize_action_distributions: summaries of the rollout actions.
        metric_min_buffer_size: metrics average over at least this many episodes.
        tracker: ``"mlflow"`` or ``"wandb"`` mirrors every scalar and the operative config
            in that tracker, continued on resume (extras ``.[mlflow]``, ``.[wandb]``); None:
            TensorBoard alone.

    Raises:
        ValueError: for ``summary_interval`` or ``metric_min_buffer_size`` below 1, or a
            ``tracker`` other than None, ``"mlflow"`` and ``"wandb"``.
    """

    #: The experiment trackers ``tracker`` may name.
    TRACKERS = ("mlflow", "wandb")

    summary_interval: int = 50
    summaries_flush_secs: int = 10
    summarize_grads_and_vars: bool = False
    summarize_action_distributions: bool = True
    metric_min_buffer_size: int = 10
    tracker: Optional[str] = None

    def __post_init__(self):
        _positive_ints(self, ("summary_interval", "metric_min_buffer_size"))
        if self.tracker is not None and self.tracker not in self.TRACKERS:
            raise ValueError(f"TrainerConfig.tracker = {self.tracker!r}: expected None, "
                             f"{' or '.join(repr(t) for t in self.TRACKERS)}")
