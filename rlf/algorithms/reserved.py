"""The names that rlf's ``Algorithm`` and ``RLAlgorithm`` reserve: properties and counters a
subclass reads but must not replace (hooks meant to be overridden are not among them)."""

from __future__ import annotations

from rlf.utils.errors import UserError

__all__ = ["RESERVED_NAMES", "check_reserved_name", "check_subclass_members"]

#: name -> the rlf version that reserved it.
RESERVED_NAMES = {
    **dict.fromkeys(["name", "on_policy", "train_state_spec", "rollout_state_spec",
                     "predict_state_spec", "num_updates", "observation_spec", "action_spec",
                     "reward_spec"], "0.1.0"),
    **dict.fromkeys(["learner", "actor_identity"], "0.2.0"),
}


def _refuse(owner: str, name: str, what: str) -> None:
    raise UserError(f"{owner}: {what} '{name}' takes a name that rlf's Algorithm reserves "
                    f"(since rlf {RESERVED_NAMES[name]}: the base class's '{name}'); rename it "
                    f"(e.g. '_{name}' or 'my_{name}'); see CHANGELOG.md")


def check_reserved_name(owner: str, name: str, what: str) -> None:
    """Refuses a buffer, parameter, module or attribute ``name`` that the base classes
    reserve.

    Args:
        owner: the algorithm's class name, for the message.
        name: the attribute's name.
        what: ``"buffer"``, ``"parameter"``, ``"module"`` or ``"attribute"``.

    Raises:
        UserError: (a ``ValueError``) naming it and the version that reserved it.
    """
    if name in RESERVED_NAMES:
        _refuse(owner, name, what)


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
