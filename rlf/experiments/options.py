"""An experiment's settings (``ExperimentOptions``), which ``rlf.bin.tune`` offers as its flags
(``option_flags``); importing it needs no Ray."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, get_args, get_type_hints

from rlf.experiments.space import SearchSpace

__all__ = ["ExperimentOptions", "OptionFlag", "option_flags", "SCHEDULERS"]

SCHEDULERS = ("fifo", "asha", "pbt")


def _flag(default: Any, help: str, lower: Any = None, upper: Any = None,
          choices: Optional[Sequence[str]] = None) -> Any:
    """A field of ``ExperimentOptions`` that ``rlf.bin.tune`` offers as the flag of its name
    (``OptionFlag``)."""
    return field(default=default, metadata={"flag": OptionFlag(help, lower, upper, choices)})


@dataclass(frozen=True)
class OptionFlag:
    """How ``rlf.bin.tune`` offers a field of ``ExperimentOptions`` as a flag of its name.

    Attributes:
        help: the flag's help.
        lower, upper: its bounds, or None.
        choices: its values (an enum flag), or None.
    """

    help: str
    lower: Any = None
    upper: Any = None
    choices: Optional[Sequence[str]] = None


def option_flags() -> List[Tuple[str, type, Any, OptionFlag]]:
    """``(name, type, default, flag)`` of each field of ``ExperimentOptions`` that is a flag
    of ``rlf.bin.tune`` (its type with ``Optional`` taken off)."""
    hints = get_type_hints(ExperimentOptions)
    out = []
    for f in fields(ExperimentOptions):
        if "flag" in f.metadata:
            kind = hints[f.name]
            kind = next((a for a in get_args(kind) if a is not type(None)), kind)
            out.append((f.name, kind, f.default, f.metadata["flag"]))
    return out


@dataclass
class ExperimentOptions:
    """An experiment's settings (``rlf.bin.tune``'s flags).

    Attributes:
        conf: the gin file.
        root_dir: the experiment's directory.
        space: the varied bindings.
        conf_params: bindings for every trial, after the conf.
        num_samples: samples of ``space.sample`` (per grid point).
        scheduler: ``"fifo"``, ``"asha"`` or ``"pbt"``.
        metric: the reported metric schedulers rank by (``RESULT_METRICS``).
        mode: ``"max"`` or ``"min"``.
        max_concurrent: trials running at once (0: as many as the resources allow).
        address: a running Ray cluster's address (None: the ``RAY_ADDRESS`` environment
            variable's if set, else a local Ray; ``'local'``: a local Ray).
        num_cpus: the local Ray's CPUs (None: the machine's).
        step_iterations: iterations per trial step (Tune's ``training_iteration``).
        step_env_steps: environment steps per trial step instead (0: by iterations).
        checkpoint_every: trial steps between Tune checkpoints (0: PBT's
            ``perturbation_interval``, else 10).
        perturbation_interval: PBT's, in trial steps.
        quantile_fraction: PBT's: the bottom fraction clones the top fraction.
        resample_probability: PBT's: the chance a mutated value is drawn anew.
        grace_period: ASHA's minimum trial steps.
        reduction_factor: ASHA's.
        layout: ``"trials"`` or ``"suite"`` (``ExperimentSpec.layout``).
        max_failures: times a failed trial is restarted from its last checkpoint.
    """

    conf: str
    root_dir: str
    space: SearchSpace = field(default_factory=SearchSpace)
    conf_params: Sequence[str] = ()
    num_samples: int = _flag(1, "samples of the --sample values per grid point", lower=1)
    scheduler: str = _flag("fifo", "trial scheduler", choices=SCHEDULERS)
    metric: Optional[str] = _flag(None, "the metric ASHA and PBT rank by (e.g. AverageReturn)")
    mode: str = _flag("max", "whether the metric is maximised", choices=("max", "min"))
    max_concurrent: int = _flag(0, "trials at once (0: as the CPUs allow)", lower=0)
    address: Optional[str] = _flag(None, "a running Ray cluster's address (default: "
                                         "RAY_ADDRESS's if set, else a local Ray)")
    num_cpus: Optional[int] = _flag(None, "CPUs of the local Ray (default: the machine's)",
                                    lower=1)
    step_iterations: int = _flag(10, "iterations per trial step", lower=0)
    step_env_steps: int = _flag(0, "environment steps per trial step instead", lower=0)
    checkpoint_every: int = _flag(0, "trial steps between checkpoints (0: PBT's perturbation "
                                     "interval, else 10)", lower=0)
    perturbation_interval: int = _flag(5, "PBT: trial steps between perturbations", lower=1)
    quantile_fraction: float = _flag(0.25, "PBT: the fraction that clones the top one",
                                     lower=0.0, upper=0.5)
    resample_probability: float = _flag(0.25, "PBT: the chance a value is drawn anew",
                                        lower=0.0, upper=1.0)
    grace_period: int = _flag(2, "ASHA: trial steps before a trial may be stopped", lower=1)
    reduction_factor: float = _flag(2.0, "ASHA: the halving rate", lower=1.01)
    layout: str = "trials"
    max_failures: int = _flag(0, "restarts of a failed trial from its checkpoint", lower=0)

    @property
    def checkpoint_frequency(self) -> int:
        """Trial steps between Tune checkpoints."""
        if self.checkpoint_every:
            return self.checkpoint_every
        return self.perturbation_interval if self.scheduler == "pbt" else 10

    def settings(self) -> Dict[str, Any]:
        """What a restart must repeat (``experiment.json``)."""
        out = asdict(self)
        for key in ("max_concurrent", "address", "num_cpus", "max_failures"):
            out.pop(key)
        out["conf"] = str(Path(self.conf).resolve())
        out["root_dir"] = str(Path(self.root_dir).resolve())
        return json.loads(json.dumps(out))
