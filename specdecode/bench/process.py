"""A server in a process of its own on a loopback port, for the bench (llama-server, `specdecode serve`): a free
port, waiting until GET /health answers 200 (or the process dies, or time runs out: a one-line error), stopping,
and a server that does not outlive the bench however the bench ends."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_PRCTL = ctypes.CDLL(None).prctl  # (looked up here: the child of a fork should call, not load)
PR_SET_PDEATHSIG = 1


def dies_with_its_parent() -> None:
    """`preexec_fn` for a server the bench starts: Linux sends it SIGTERM when the thread that started it ends
    (prctl's PR_SET_PDEATHSIG), so a bench killed outright, which runs no clean-up of its own, leaves no server
    behind holding the cores. Start such servers from a thread that lives as long as they should (the bench's
    main thread)."""
    _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def wait_healthy(url: str, process: subprocess.Popen, log, name: str, seconds: float,
                 stop: Callable[[], None]) -> None:
    """Return once the server at url is healthy; else stop it and raise ValueError with the last line of its log
    (a binary file object)."""
    deadline = time.monotonic() + seconds
    while not healthy(url):
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            lines = log.read().decode(errors="replace").strip().splitlines()
            why = f"exited with status {process.returncode}" if process.poll() is not None \
                else f"not healthy within {seconds:g} s"
            stop()
            raise ValueError(f"{name} did not start ({why}): {lines[-1].strip() if lines else 'no output'}")
        time.sleep(0.2)


def stop(process: subprocess.Popen, log) -> None:
    """Terminate the process (kill it after 10 s) and close its log; harmless twice."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    log.close()
