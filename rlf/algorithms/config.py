"""TrainerConfig: every setting of the training loop, gin-configurable (ALF's field names), built
from the typed parts of ``config_parts.py``."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any, Callable, Dict, List, Sequence, Set, cast

import gin

from rlf.algorithms.config_parts import (RANDOM_SEED_LIMIT, ActorConfig, CheckpointConfig,
                                         DataPathConfig, EvaluationConfig, RunConfig,
                                         SummaryConfig, changed_fields, without_effect)
from rlf.utils.errors import ConfigWarning

__all__ = ["TrainerConfig", "RANDOM_SEED_LIMIT"]

_warned_removed: Set[str] = set()  # removed fields already warned about

#: part name -> its class, in the order they are built and validated.
_PARTS = (("run", RunConfig), ("data_path", DataPathConfig), ("actors", ActorConfig),
          ("evaluation", EvaluationConfig), ("checkpoints", CheckpointConfig),
          ("summaries", SummaryConfig))
#: flat field -> the part that holds it.
_FIELD_PART = {f.name: name for name, cls in _PARTS for f in dataclasses.fields(cls)}
#: accepted and ignored, with their old defaults (older run directories' config.gin).
_REMOVED = {"debug_summaries": False, "max_unroll_length": 0,
            "rl_train_after_update_steps": 0, "rl_train_every_update_steps": 1}


#: The evaluation's settings that ``evaluate`` not given at all leaves without effect.
_EVALUATION_SETTINGS = ("eval_interval", "num_eval_episodes", "num_eval_environments")


def _check_across_parts(run: RunConfig, data: DataPathConfig, actors: ActorConfig) -> None:
    """The checks that span two parts (``TrainerConfig``'s ``Raises``)."""
    length = data.unroll_length
    if actors.async_unroll and (length != int(length) or length < 1):
        raise ValueError(f"TrainerConfig.async_unroll needs an integer unroll_length >= 1, "
                         f"got {length}")
    learners = run.num_learners
    if learners > 1 and actors.async_unroll and actors.num_actors % learners:
        raise ValueError(f"TrainerConfig.num_actors = {actors.num_actors} cannot be split "
                         f"evenly among num_learners = {learners} learners; use a "
                         f"multiple of {learners}")
    if learners > 1 and data.offline_buffer_dir:
        raise ValueError("TrainerConfig.offline_buffer_dir is not supported with "
                         "num_learners > 1 yet; train offline with one learner")
    if data.unroll_length == 0 and not run.num_iterations:
        raise ValueError(f"TrainerConfig.unroll_length = 0 takes no environment step, so "
                         f"num_env_steps = {run.num_env_steps} would never be reached: "
                         f"bound the run with num_iterations")


def _signature(init: Callable) -> Callable:
    """Gives ``TrainerConfig.__init__`` the keyword-only signature and annotations of the
    parts' and the removed fields, which gin and ``gin_config``'s type check read."""
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: Dict[str, Any] = {}
    for _, cls in _PARTS:
        for f in dataclasses.fields(cls):
            # (a field with a default_factory shows None: the part builds its default)
            default = None if f.default is dataclasses.MISSING else f.default
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=f.type))
            annotations[f.name] = f.type
    for name, old_default in _REMOVED.items():
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        default=old_default, annotation=type(old_default)))
        annotations[name] = type(old_default)
    setattr(init, "__signature__", inspect.Signature(params))  # noqa: B010 (for mypy)
    init.__annotations__ = annotations
    return init


def _part(name: str, doc: str) -> property:
    """The read-only property of part ``name``."""
    return property(lambda self: self._parts[name], doc=doc)


@gin.configurable
class TrainerConfig:
    """Settings of ``Trainer`` and of its ``TrainingLoop``: the gin face of six typed parts.

    A gin file sets them by their flat names (``TrainerConfig.unroll_length = 20``): the
    constructor's keywords are the fields of the parts (``config_parts.py``, where each is
    documented). It builds the frozen parts, then checks what spans two of them. A consumer
    reads its part (``config.data_path.unroll_length``; the flat name reads the same value).
    ``replace`` makes a new config.

    | part | what it holds |
    |---|---|
    | ``run`` (``RunConfig``) | where the run writes, what it trains, seed, budget, process, device, learners |
    | ``data_path`` (``DataPathConfig``) | unroll, replay buffer, sequences, mini-batches, offline data |
    | ``actors`` (``ActorConfig``) | actor processes or Ray actors, their failures, the reproducible mode |
    | ``evaluation`` (``EvaluationConfig``) | evaluations with ``predict_step`` |
    | ``checkpoints`` (``CheckpointConfig``) | checkpoint interval, retention, the replay buffer |
    | ``summaries`` (``SummaryConfig``) | TensorBoard summaries, metrics' window, tracker |

    Four removed settings (``_REMOVED``) are accepted and ignored, so that older run
    directories' ``config.gin`` parses; a value other than the old default warns once.

    Raises:
        TypeError: for a keyword that is no setting.
        ValueError: for a value a part refuses, settings of two parts that contradict, or
            ``eval_interval``, ``num_eval_episodes`` or ``num_eval_environments`` changed
            without ``evaluate`` given (an explicit ``evaluate = False`` switches a conf's
            evaluation off and is not refused).
    """

    #: Settings of the replay buffer, which only off-policy algorithms have (the data path's,
    #: and the checkpoints' ``save_replay_buffer``).
    REPLAY_SETTINGS = DataPathConfig.REPLAY_SETTINGS + ("save_replay_buffer",)

    #: Settings of the actors of ``async_unroll``, which a run without actors ignores.
    ACTOR_SETTINGS = ActorConfig.ACTOR_SETTINGS

    without_effect = staticmethod(without_effect)

    def changed_settings(self, names: Sequence[str]) -> List[str]:
        """``["name = value", ...]`` for those of ``names`` (fields of this config) whose
        value is not the default, in the order of ``names``."""
        return [entry for n in names
                for entry in changed_fields(getattr(self, _FIELD_PART[n]), [n])]

    def __init__(self, **settings: Any):
        unknown = sorted(set(settings) - set(_FIELD_PART) - set(_REMOVED))
        if unknown:
            raise TypeError(f"TrainerConfig got unexpected settings {', '.join(unknown)}")
        for name, old_default in _REMOVED.items():
            if settings.pop(name, old_default) != old_default and name not in _warned_removed:
                _warned_removed.add(name)
                warnings.warn(f"TrainerConfig.{name} was removed and is ignored",
                              ConfigWarning, stacklevel=2)
        parts = {name: cls(**{f.name: settings[f.name] for f in dataclasses.fields(cls)
                              if f.name in settings})
                 for name, cls in _PARTS}
        object.__setattr__(self, "_parts", parts)
        if "evaluate" not in settings:  # given False, they are a conf's evaluation switched off
            unused = changed_fields(parts["evaluation"], _EVALUATION_SETTINGS)
            if unused:
                raise ValueError(without_effect(unused, "with evaluation", "set "
                                                "TrainerConfig.evaluate = True too, or remove "
                                                "{it}"))
        _check_across_parts(cast(RunConfig, parts["run"]),
                            cast(DataPathConfig, parts["data_path"]),
                            cast(ActorConfig, parts["actors"]))

    run = _part("run", "The run's part (``RunConfig``).")
    data_path = _part("data_path", "The data path's part (``DataPathConfig``).")
    actors = _part("actors", "The actors' part (``ActorConfig``).")
    evaluation = _part("evaluation", "The evaluations' part (``EvaluationConfig``).")
    checkpoints = _part("checkpoints", "The checkpoints' part (``CheckpointConfig``).")
    summaries = _part("summaries", "The summaries' part (``SummaryConfig``).")

    __init__ = _signature(__init__)

    def __getattr__(self, name: str) -> Any:
        """A flat field (``config.unroll_length``), read from its part."""
        part = _FIELD_PART.get(name)
        if part is None or name.startswith("_"):
            raise AttributeError(f"TrainerConfig has no setting '{name}'")
        return getattr(self.__dict__["_parts"][part], name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TrainerConfig is frozen: it cannot set '{name}' after it is "
                             f"built; make a new one with config.replace({name}=...)")

    def replace(self, **changes: Any) -> "TrainerConfig":
        """A new ``TrainerConfig`` with ``changes`` (flat fields) and this one's other
        settings, validated as any other.

        Raises:
            ValueError: as the constructor, and for a name that is no setting.
        """
        unknown = sorted(set(changes) - set(_FIELD_PART))
        if unknown:
            raise ValueError(f"TrainerConfig has no setting {', '.join(unknown)}")
        return TrainerConfig(**{**self.as_dict(), **changes})

    def as_dict(self) -> Dict[str, Any]:
        """Every setting, by its flat name."""
        return {f.name: getattr(part, f.name) for part in self._parts.values()
                for f in dataclasses.fields(part)}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"TrainerConfig({fields})"
