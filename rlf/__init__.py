"""rlf: a PyTorch reinforcement-learning framework in the mould of ALF."""

#: The release; ``CHANGELOG.md`` lists what each one changed for users.
__version__ = "0.3.0"
