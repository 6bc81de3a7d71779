"""Nested structures (namedtuples, dicts, lists, tuples) over optree; see ``rlf.nest.nest``."""

from rlf.nest.nest import (assert_same_structure, find_field, flatten, flatten_with_path,
                           get_field, is_namedtuple, is_nested, map_structure,
                           map_structure_up_to, map_structure_with_path, pack_sequence_as,
                           set_field)
from rlf.nest import utils

__all__ = [
    "assert_same_structure", "find_field", "flatten", "flatten_with_path", "get_field",
    "is_namedtuple", "is_nested", "map_structure", "map_structure_up_to",
    "map_structure_with_path", "pack_sequence_as", "set_field", "utils",
]
