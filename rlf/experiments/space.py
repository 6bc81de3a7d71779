"""An experiment's search space: ``--grid``, ``--sample``, ``--seeds`` and ``--games`` as Ray
Tune's parameter space, and a trial's values as gin bindings.

A trial's config maps gin binding names (``torch.optim.Adam.lr``,
``TrainerConfig.random_seed``, ``load.env_name``) to Python values; ``trial_bindings`` writes
them as the ``--conf_param`` bindings of an ordinary run. A gin reference (``@torch.optim.SGD``)
or macro (``%GAMMA``) is kept as text beginning with ``@`` or ``%`` and written as it is.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

from rlf.utils.errors import UserError

__all__ = ["SAMPLERS", "SearchSpace", "parse_grid", "parse_sample", "gin_value",
           "python_value", "trial_bindings", "short_name"]

#: ``--sample`` distributions: name -> (the ``ray.tune`` function, its argument count).
SAMPLERS = {"uniform": ("uniform", 2), "loguniform": ("loguniform", 2),
            "quniform": ("quniform", 3), "qloguniform": ("qloguniform", 3),
            "randint": ("randint", 2), "lograndint": ("lograndint", 2),
            "choice": ("choice", 1)}
SEED_KEY = "TrainerConfig.random_seed"
ENV_KEY = "load.env_name"
_NAME = re.compile(r"^([A-Za-z_][\w.]*/)*[A-Za-z_][\w.]*\.[A-Za-z_]\w*$")
_REFERENCE = re.compile(r"(?<![\w'\"])([@%][A-Za-z_][\w./]*(?:\(\))?)")


def _split(text: str, flag: str) -> Tuple[str, str]:
    """``'Name.param=value'`` -> ``("Name.param", "value")``.

    Raises:
        UserError: without ``=`` or for a name that is not a gin binding's.
    """
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not value or not _NAME.match(name):
        example = "[1e-3, 3e-4]" if flag == "--grid" else "loguniform(1e-4, 1e-2)"
        raise UserError(f"{flag} {text!r}: expected 'Configurable.param=...' (e.g. {flag} "
                        f"'torch.optim.Adam.lr={example}')")
    return name, value


def _literal(text: str, where: str) -> Any:
    """A Python literal, with gin references and macros (``@name``, ``%NAME``) as text.

    Raises:
        UserError: naming ``where`` for anything else.
    """
    quoted = _REFERENCE.sub(lambda m: repr(m.group(1)), text)
    try:
        return ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        raise UserError(f"{where}: {text!r} is not a value (numbers, strings in quotes, "
                        f"True/False/None, tuples, lists, @references)") from None


def parse_grid(text: str) -> Tuple[str, List[Any]]:
    """``--grid 'Name.param=[v1, v2]'`` -> ``("Name.param", [v1, v2])``.

    Raises:
        UserError: for a malformed binding or an empty or repeated list.
    """
    name, value = _split(text, "--grid")
    values = _literal(value, f"--grid {text!r}")
    if not isinstance(values, list) or not values:
        raise UserError(f"--grid {text!r}: give a non-empty list in brackets, e.g. "
                        f"'{name}=[1, 2]'")
    if len({repr(v) for v in values}) != len(values):
        raise UserError(f"--grid {text!r}: a value is given twice")
    return name, values


def parse_sample(text: str) -> Tuple[str, str, Tuple[Any, ...]]:
    """``--sample 'Name.param=loguniform(a, b)'`` -> ``("Name.param", "loguniform", (a, b))``.

    Raises:
        UserError: for a malformed binding, an unknown distribution (``SAMPLERS``), a wrong
            number of arguments or bounds out of order.
    """
    name, value = _split(text, "--sample")
    match = re.fullmatch(r"(\w+)\((.*)\)", value, re.S)
    if not match or match.group(1) not in SAMPLERS:
        raise UserError(f"--sample {text!r}: expected one of "
                        f"{', '.join(f'{k}(...)' for k in SAMPLERS)}")
    kind = match.group(1)
    args = _literal(f"({match.group(2)},)", f"--sample {text!r}")
    if len(args) != SAMPLERS[kind][1]:
        raise UserError(f"--sample {text!r}: {kind} takes {SAMPLERS[kind][1]} argument(s)")
    if kind == "choice":
        if not isinstance(args[0], list) or not args[0]:
            raise UserError(f"--sample {text!r}: choice takes a non-empty list")
    elif not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args) or \
            not args[0] < args[1] or (kind.startswith("log") and args[0] <= 0):
        raise UserError(f"--sample {text!r}: give numbers low < high"
                        f"{' (both > 0)' if kind.startswith('log') else ''}")
    return name, kind, tuple(args)


@dataclass
class SearchSpace:
    """The bindings an experiment varies: grids (every combination), samples (drawn per
    trial; PBT's mutations) and the seeds and games grids.

    Attributes:
        grid: ``{binding: [values]}``.
        sample: ``{binding: (distribution, args)}``.
    """

    grid: Dict[str, List[Any]] = field(default_factory=dict)
    sample: Dict[str, Tuple[str, Tuple[Any, ...]]] = field(default_factory=dict)

    @classmethod
    def from_flags(cls, grids: Sequence[str] = (), samples: Sequence[str] = (),
                   seeds: Sequence[int] = (), games: Sequence[str] = ()) -> "SearchSpace":
        """Parses the command line's lists (``parse_grid``, ``parse_sample``); ``games``
        become ``load.env_name='ALE/<game>-v5'``, ``seeds`` ``TrainerConfig.random_seed``.

        Raises:
            UserError: for a malformed flag, or a binding given twice.
        """
        space = cls()
        entries: List[Tuple[str, str]] = []
        for text in grids:
            name, values = parse_grid(text)
            space.grid[name] = values
            entries.append((name, f"--grid {text!r}"))
        for text in samples:
            name, kind, args = parse_sample(text)
            space.sample[name] = (kind, args)
            entries.append((name, f"--sample {text!r}"))
        if games:
            space.grid[ENV_KEY] = [f"ALE/{g}-v5" for g in games]
            entries.append((ENV_KEY, "--games"))
        if seeds:
            space.grid[SEED_KEY] = [int(s) for s in seeds]
            entries.append((SEED_KEY, "--seeds"))
        seen: Dict[str, str] = {}
        for name, where in entries:
            # A --grid and a --sample of one binding: PBT's starting values and the range
            # it explores (SearchSpace.explored_from_grid).
            both = seen.get(name, "").startswith("--grid") and where.startswith("--sample")
            if name in seen and not both:
                raise UserError(f"{where}: {name} is already varied by {seen[name]}")
            seen[name] = where
        return space

    @property
    def keys(self) -> List[str]:
        """Every varied binding, grids first."""
        return list(dict.fromkeys(list(self.grid) + list(self.sample)))

    @property
    def explored_from_grid(self) -> List[str]:
        """Bindings given by both ``--grid`` (the trials' starting values) and ``--sample``
        (the range population-based training explores from them)."""
        return [k for k in self.sample if k in self.grid]

    def domain(self, name: str):
        """The ``ray.tune`` sampler of the sampled binding ``name``."""
        from ray import tune
        kind, args = self.sample[name]
        return getattr(tune, SAMPLERS[kind][0])(*args)

    def param_space(self) -> Dict[str, Any]:
        """Tune's ``param_space``: ``tune.grid_search`` per grid, a sampler per sample."""
        from ray import tune
        space: Dict[str, Any] = {k: tune.grid_search(v) for k, v in self.grid.items()}
        space.update({k: self.domain(k) for k in self.sample if k not in self.grid})
        return space

    def num_trials(self, num_samples: int) -> int:
        """The number of trials: the grids' product times ``num_samples``."""
        n = num_samples
        for values in self.grid.values():
            n *= len(values)
        return n


def gin_value(value: Any) -> str:
    """A trial value as gin text: references and macros (``@...``, ``%...``) as they are,
    numpy numbers as Python's, everything else as its ``repr``."""
    if isinstance(value, str):
        return value if value[:1] in "@%" else repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(gin_value(v) for v in value)
        if isinstance(value, list):
            return f"[{items}]"
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(python_value(value))


def python_value(value: Any) -> Any:
    """``value``, or for a numpy scalar (Tune's samplers draw them; ``np.float64`` is a
    ``float`` whose repr is ``np.float64(...)``) the Python number."""
    return value.item() if hasattr(value, "item") and type(value) not in (bool, int, float) \
        else value


def trial_bindings(config: Dict[str, Any], keys: Sequence[str]) -> List[str]:
    """``["Name.param=value", ...]`` for the varied ``keys`` of a trial's ``config``."""
    return [f"{k}={gin_value(config[k])}" for k in keys if k in config]


def short_name(config: Dict[str, Any], keys: Sequence[str], limit: int = 80) -> str:
    """A trial's values for a directory name: ``lr=0.001_seed0``, ``Pong_seed1``."""
    parts = []
    for key in keys:
        value = config.get(key)
        if key == SEED_KEY:
            parts.append(f"seed{value}")
        elif key == ENV_KEY and isinstance(value, str):
            parts.append(value.split("/")[-1].split("-v")[0])
        else:
            value = python_value(value)
            text = f"{value:.4g}" if isinstance(value, float) else str(value).lstrip("@%")
            parts.append(f"{key.rsplit('.', 1)[-1]}={text}")
    name = re.sub(r"[^\w.=+-]", "", "_".join(parts))
    return name[:limit]
