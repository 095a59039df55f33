"""A real uvicorn server in a thread on a free loopback port, and the official `openai` client pointed at it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

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
