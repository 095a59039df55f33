"""bin/bootstrap's optional llama-cpp-python step: a build that fails ends in a warning and exit 0, promptly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_failing_llama_cpp_build_warns_and_returns_within_a_minute(tmp_path):
    """No C compiler (CC, CXX name none): CMake's configure fails within seconds, before any compiling. The step must
    end with the warning and exit 0 (it used to wait for ever on a status file the failed build never wrote)."""
    env = os.environ | {"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++", "SPECDECODE_CACHE": str(tmp_path)}
    started = time.monotonic()
    process = subprocess.Popen([str(ROOT / "bin" / "bootstrap"), "llama-cpp"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the build too, not only the script
        process.communicate()
        raise AssertionError("bin/bootstrap llama-cpp did not return within 60 s of a failed build") from None
    assert process.returncode == 0, err
    assert "warning: llama-cpp-python did not build" in err
    assert time.monotonic() - started < 60
    wheels = list((tmp_path / "wheels").glob("*"))
    assert wheels == [], wheels  # nothing cached: neither a wheel nor a half-built directory
