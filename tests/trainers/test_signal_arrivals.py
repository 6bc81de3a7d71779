"""A signal's arrival time is recorded when it arrives, not when Python runs its handler,
which waits while the main thread is inside a native call."""

import os
import signal
import threading
import time

import torch

from rlf.trainers.signal_arrivals import SignalArrivals


def test_arrivals_are_timed_while_the_main_thread_is_in_a_native_call():
    handled = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: handled.append(time.monotonic()))
    arrivals = SignalArrivals()
    try:
        sent = []

        def send_twice():
            for _ in range(2):
                sent.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.2)

        a = torch.randn(3000, 3000)
        sender = threading.Timer(0.05, send_twice)
        start = time.monotonic()
        sender.start()
        while time.monotonic() - start < 0.6:  # native calls with few bytecodes between
            a = torch.linalg.matrix_exp(a * 1e-4)
        sender.join()
        time.sleep(0.05)
        times = arrivals.times(signal.SIGUSR1, at_least=2)
    finally:
        arrivals.close()
        signal.signal(signal.SIGUSR1, previous)
    assert len(times) == 2 and handled
    # each arrival within a few milliseconds of its sending, 0.2 s apart
    assert all(abs(t - s) < 0.05 for t, s in zip(times, sent)), (times, sent)
    assert 0.15 < times[1] - times[0] < 0.3
