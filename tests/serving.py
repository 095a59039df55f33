"""A real uvicorn server in a thread on a free loopback port, and the official `openai` client pointed at it; and
`held`, which keeps a service's requests waiting their turn."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import anyio
import openai
import uvicorn


@contextlib.contextmanager
def openai_client(app) -> Iterator[openai.OpenAI]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    port = sock.getsockname()[1]
    try:
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=120)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextlib.contextmanager
def held(service) -> Iterator[None]:
    """Every sequence of the service's scheduler leased for the block: its requests wait their turn meanwhile."""
    scheduler = service.scheduler
    leases = [scheduler.lease() for _ in range(scheduler.sequences)]
    for lease in leases:
        assert anyio.run(scheduler.acquire, lease, time.monotonic() + 10, None)
    try:
        yield
    finally:
        for lease in leases:
            scheduler.release(lease)
