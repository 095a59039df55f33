"""Which thread computes in a server (server/threads.py): passes on one engine thread, rounds' threads alone."""

from __future__ import annotations

import threading

import pytest
import torch

from specdecode.server import threads


def in_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(30)
    return out[0]


def test_a_thread_made_serial_computes_alone_and_the_others_do_not_change():
    assert "OpenMP" in torch.__config__.parallel_info()  # (the pinned torch's backend: libgomp on Linux)
    assert threads.openmp_runtime() is not None
    before = torch.get_num_threads()

    def serial_then_count():
        threads.serial()
        threads.serial()  # (twice: harmless)
        return torch.get_num_threads()

    assert in_thread(serial_then_count) == 1
    assert torch.get_num_threads() == before  # this thread's count unchanged
    assert in_thread(torch.get_num_threads) == before  # and a new thread's
    assert threads.on_engine(lambda: (threads.serial(), torch.get_num_threads())[1]) == before  # never the engine's


def test_on_engine_runs_on_one_thread_returns_and_raises():
    idents = {in_thread(lambda: threads.on_engine(threading.get_ident)) for _ in range(3)}
    assert len(idents) == 1 and threading.get_ident() not in idents
    assert threads.on_engine(lambda: threads.on_engine(threading.get_ident)) in idents  # (no deadlock inside it)
    with pytest.raises(ValueError, match="bad"):
        threads.on_engine(lambda: (_ for _ in ()).throw(ValueError("bad")))
