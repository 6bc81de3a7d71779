"""Fixtures shared by the algorithm tests."""

import pytest
import torch


@pytest.fixture
def one_torch_thread():
    """Runs the test with one torch thread (small networks: more threads only contend) and
    restores the thread count afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
