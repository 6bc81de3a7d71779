"""The support matrix of docs/support-matrix.md, cell by cell: every algorithm on every path
trains or is refused with exactly the documented line (``tests/matrix/cells.py``)."""

import gin
import pytest

from tests.matrix import cells

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    import ray
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("matrix")
    try:
        table = cells.run_all(root)
    finally:
        torch.set_num_threads(threads)
        gin.clear_config()
        if ray.is_initialized():
            ray.shutdown()
    return {n: {c: cells.normalized(o, root) for c, o in row.items()}
            for n, row in table.items()}


def test_the_page_lists_every_row_and_column():
    table = cells.documented()
    assert list(table) == list(cells.ROWS)
    assert all(list(row) == list(cells.COLUMNS) for row in table.values())


@pytest.mark.parametrize("name", list(cells.ROWS))
def test_each_cell_is_as_documented(matrix, name):
    documented = cells.documented()[name]
    differ = {c: (matrix[name][c], documented[c]) for c in cells.COLUMNS
              if matrix[name][c] != documented[c]}
    assert not differ, differ
    for outcome in matrix[name].values():
        assert outcome == "trains" or ("\n" not in outcome and len(outcome) < 400)
