"""The names rlf's ``Algorithm`` and ``RLAlgorithm`` reserve: properties and counters a subclass
reads but must not replace, and the base classes' state, kept in ``_rlf_*`` attributes
(``set_framework_state``) and the ``_reward_weights`` buffer so that no name a subclass may
reasonably use (``_actor``, ``_critic``, ...) is theirs. ALF's protected names (``_name``,
``_env``, ...) are set for subclasses to read; rlf never reads them.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from rlf.utils.errors import UserError

__all__ = ["RESERVED_NAMES", "FRAMEWORK_PREFIX", "FRAMEWORK_NAMES", "check_reserved_name",
           "check_subclass_members", "set_framework_state"]

#: The prefix of the attributes holding the base classes' state.
FRAMEWORK_PREFIX = "_rlf_"
#: The base classes' state outside ``FRAMEWORK_PREFIX`` (checkpoint keys of rlf 0.1).
FRAMEWORK_NAMES = frozenset({"_reward_weights"})

#: name -> the rlf version that reserved it.
RESERVED_NAMES = {
    **dict.fromkeys(["name", "on_policy", "train_state_spec", "rollout_state_spec",
                     "predict_state_spec", "num_updates", "observation_spec", "action_spec",
                     "reward_spec"], "0.1.0"),
    **dict.fromkeys(["learner", "actor_identity"], "0.2.0"),
    **dict.fromkeys(["data_needs", "run_args"], "0.3.0"),
}


def _refuse(owner: str, name: str, what: str) -> None:
    raise UserError(f"{owner}: {what} '{name}' takes a name that rlf's Algorithm reserves "
                    f"(since rlf {RESERVED_NAMES[name]}: the base class's '{name}'); rename it "
                    f"(e.g. '_{name}' or 'my_{name}'); see CHANGELOG.md")


def _is_framework_name(name: str) -> bool:
    return (name.startswith(FRAMEWORK_PREFIX) and name != "_rlf_base_class"
            or name in FRAMEWORK_NAMES)


def _refuse_framework_name(owner: str, name: str, what: str) -> None:
    raise UserError(f"{owner}: {what} '{name}' takes a name that holds the state of rlf's "
                    f"Algorithm (every '{FRAMEWORK_PREFIX}*' name and "
                    f"{sorted(FRAMEWORK_NAMES)}); rename it")


def set_framework_state(module: nn.Module, **values: Any) -> None:
    """Sets the base classes' state attributes of an algorithm, past ``check_reserved_name``."""
    for name, value in values.items():
        nn.Module.__setattr__(module, name, value)


def check_reserved_name(owner: str, name: str, what: str) -> None:
    """Refuses a ``name`` the base classes reserve or keep their state in.

    Args:
        owner: the algorithm's class name, for the message.
        name: the attribute's name.
        what: ``"buffer"``, ``"parameter"``, ``"module"`` or ``"attribute"``.

    Raises:
        UserError: (a ``ValueError``) naming it (and the version that reserved it).
    """
    if name in RESERVED_NAMES:
        _refuse(owner, name, what)
    if _is_framework_name(name):
        _refuse_framework_name(owner, name, what)


def check_subclass_members(cls: type, base: type) -> None:
    """Refuses a class among ``cls`` and its ancestors that derives from ``base`` (rlf's
    ``Algorithm``) and defines a reserved name (a method, property or class attribute); rlf's
    own base classes (marked ``_rlf_base_class = True``) define them.

    Raises:
        UserError: (a ``ValueError``) naming the class, the name and the version.
    """
    for klass in cls.__mro__:
        if not issubclass(klass, base) or vars(klass).get("_rlf_base_class"):
            continue
        for name in sorted(RESERVED_NAMES.keys() & vars(klass).keys()):
            _refuse(klass.__name__, name, "the member")
        for name in sorted(filter(_is_framework_name, vars(klass))):
            _refuse_framework_name(klass.__name__, name, "the member")
