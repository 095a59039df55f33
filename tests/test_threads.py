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


@pytest.mark.parametrize("sequences", [1, 4])
def test_a_served_request_computes_its_passes_on_the_engine_thread(sequences):
    """One sequence (requests one at a time, as on llama.cpp and transformers, which keep one cache): every pass of
    the target and the draft, the rounds themselves too, on the engine thread; several: the batched passes there."""
    from fastapi.testclient import TestClient

    from specdecode.server import create_app

    with TestClient(create_app(target="toy", sequences=sequences)) as client:
        service = client.app.state.service
        loaded = service.load()
        assert service.scheduler.batched == (sequences > 1)
        seen, patched = [], [loaded.target.model, loaded.draft.model]
        for model in patched:
            extend, extend_batch = model.extend, model.extend_batch
            model.extend = lambda tokens, keep=None, f=extend: (seen.append(threading.get_ident()), f(tokens, keep))[1]
            model.extend_batch = lambda parts, prompt_rows=None, f=extend_batch: (
                seen.append(threading.get_ident()), f(parts, prompt_rows))[1]
        try:
            answer = client.post("/v1/completions", json={"prompt": "the cat", "max_tokens": 12, "gamma": 2})
        finally:
            for model in patched:
                del model.extend, model.extend_batch
    assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 12
    assert len(seen) > 3 and set(seen) == {threads.on_engine(threading.get_ident)}
