"""llama.cpp as its users run it, for the bench: `llama-server` built with llama.cpp's default switches from the
sources vendored in the llama-cpp-python sdist we pin, plain or speculating with its own drafts.

    server_binary()        the binary, built once per CPU on the bench's demand (about 6 minutes on 2 cores) and
                           kept in the cache; never built by the main command
    LlamaServer(gguf, ..)  one server process on a loopback port, with extra flags (e.g. -md DRAFT --spec-type
                           draft-simple); stopped by close()
    llama_server_method()  a bench Method: one POST /completion of the prompt's token ids per run

The build differs from a default one only in linking (static: the binary needs no build tree beside it); the
kernels and their switches (GGML_NATIVE, llamafile sgemm, weight repacking) are llama.cpp's defaults, except on a CPU
where that build dies on its first answer (ggml's AMX kernels; then AMX is off: `server_build()`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from ..models.default import cache_dir
from ..sampling import SamplingConfig
from .methods import Method, Outcome
from .process import dies_with_its_parent, free_port, stop, wait_healthy

VERSION = "0.3.36"  # llama-cpp-python's sdist, as bin/bootstrap pins it
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DBUILD_SHARED_LIBS=OFF"]
RECIPE = 2  # how server_binary builds (part of the cache key: a cached binary of an older recipe is built again).
            # 2: a default build killed by any signal on its first answer is rebuilt with AMX off, not only by SIGILL


def _cpu_key() -> str:
    import hashlib

    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return hashlib.sha256(f"{flags}\n{os.uname().machine}\n{VERSION}\n{RECIPE}".encode()).hexdigest()[:12]


AMX_OFF = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"  # compiler flags: ggml's AMX kernels not built
BUILD_NOTE = "build.txt"  # beside the binary: how it was built, for the bench report


def server_binary(progress: bool = True) -> Path:
    """The cached llama-server for this CPU, built first if missing (one-line ValueError if it cannot be).

    The default build first; if that one dies on its first answer here (ggml's AMX kernels on newer Xeons under
    Linux: SIGILL at a `tilezero`, llama.cpp PR #26954, or SIGSEGV in `ggml_backend_amx_mul_mat`), the same build with
    AMX off, as such a CPU's users must run it; `server_build()` says which."""
    binary = cache_dir() / f"llama-server-{VERSION}-{_cpu_key()}" / "llama-server"
    if binary.is_file():
        return binary
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            raise ValueError(f"building llama-server needs {tool}, which is not installed")
    from tqdm import tqdm

    with tempfile.TemporaryDirectory(prefix="llama-server-build.") as scratch:
        scratch = Path(scratch)
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                  "--disable-pip-version-check", "-d", str(scratch), f"llama-cpp-python=={VERSION}"],
                                 capture_output=True, text=True)
        sdists = list(scratch.glob("llama_cpp_python-*.tar.gz"))
        if fetched.returncode != 0 or not sdists:
            raise ValueError(f"cannot fetch the llama-cpp-python {VERSION} sources: "
                             f"{(fetched.stderr.strip().splitlines() or ['pip failed'])[-1]}")
        with tarfile.open(sdists[0]) as archive:
            archive.extractall(scratch, filter="data")
        source = scratch / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"
        bar = tqdm(total=None, desc="building llama-server (once per CPU)", unit="step", file=sys.stderr,
                   disable=not progress)
        try:
            built, note = _build(source, scratch / "build", "", bar), "llama.cpp's default switches"
            if killer := _fatal_signal(built):
                bar.set_description("building llama-server with AMX off (the default build dies on this CPU)")
                built = _build(source, scratch / "build-amx-off", AMX_OFF, bar)
                if again := _fatal_signal(built):
                    raise ValueError(f"llama-server dies of {again} on this CPU, with AMX off too")
                note = (f"llama.cpp's default switches, AMX off (the default build dies of {killer} on its first "
                        "answer on this CPU: ggml's AMX kernels, llama.cpp PR #26954)")
        finally:
            bar.close()
        binary.parent.mkdir(parents=True, exist_ok=True)
        (binary.parent / BUILD_NOTE).write_text(note + "\n")
        partial = binary.with_name("llama-server.partial")
        shutil.copy2(built, partial)
        partial.replace(binary)  # whole or absent
    return binary


def server_build() -> str:
    """How the cached llama-server was built (after server_binary())."""
    note = server_binary().parent / BUILD_NOTE
    return note.read_text().strip() if note.is_file() else "llama.cpp's default switches"


def _build(source: Path, build: Path, cflags: str, bar) -> Path:
    """Configure and build llama-server from source into build (cflags: extra compiler flags); the binary."""
    environment = os.environ | ({"CFLAGS": cflags, "CXXFLAGS": cflags} if cflags else {})
    steps = [["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", *CMAKE_FLAGS],
             ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(os.cpu_count() or 1)]]
    log = []
    bar.reset()
    for step in steps:
        with subprocess.Popen(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=environment) as proc:
            for line in proc.stdout:
                log.append(line)
                if match := re.match(r"\[(\d+)/(\d+)\]", line):
                    bar.total = int(match[2])
                    bar.update(int(match[1]) - bar.n)
        if proc.returncode != 0:
            errors = [x.strip() for x in log if "error" in x.lower()] or [log[-1].strip() if log else "?"]
            raise ValueError(f"llama-server did not build: {errors[0][:200]}")
    return build / "bin" / "llama-server"


def _fatal_signal(binary: Path) -> str | None:
    """The signal that kills the binary (e.g. "SIGILL") before or while it answers, serving the default model's
    GGUF; None where it answers and lives."""
    from ..models.default import gguf_path

    port = free_port()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen([str(binary), "-m", str(gguf_path()), "--host", "127.0.0.1", "--port", str(port),
                                    "-t", "1", "-c", "256"], stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=dies_with_its_parent)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, process, log, "llama-server", 120, lambda: None)
            request = urllib.request.Request(url + "/completion", json.dumps({"prompt": "Hello", "n_predict": 4})
                                             .encode(), {"Content-Type": "application/json"})
            with contextlib.suppress(OSError):  # a dead server answers nothing: its exit status tells
                urllib.request.urlopen(request, timeout=120).read()
            time.sleep(0.5)
        except ValueError:  # it did not start: died (of what, its status says) or never became healthy
            pass
        finally:
            status = process.poll()
            if status is None:
                process.kill()
            process.wait()
    if status is None or status >= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(-status).name
    return f"signal {-status}"


class LlamaServer:
    """One llama-server process serving a GGUF file on a free loopback port."""

    def __init__(self, gguf: str | Path, threads: int, flags: list[str] = (), context: int = 4096,
                 startup_seconds: float = 180.0, slots: int = 1):
        """slots: requests decoded at once (-np), each with context / slots tokens of the context."""
        self.port = free_port()
        command = [str(server_binary()), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(self.port),
                   "-t", str(threads), "-tb", str(threads), "-c", str(context), "-np", str(slots), *flags]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (open as long as the server runs)
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        preexec_fn=dies_with_its_parent)
        atexit.register(self.close)  # a server never outlives the bench
        wait_healthy(f"http://127.0.0.1:{self.port}", self.process, self.log,
                     " ".join(["llama-server", *flags]), startup_seconds, self.close)

    def complete(self, body: dict) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.loads(answer.read())

    def close(self) -> None:
        stop(self.process, self.log)


def llama_server_method(name: str, server: LlamaServer, draft: str = "none", gamma: int | None = None) -> Method:
    """A bench method over a running server: the prompt's token ids in, the completion's token ids out; greedy as
    temperature 0, sampling with llama.cpp's other samplers switched off, as `methods.llama_cpp_generate` does."""

    def run(prompt_ids: list[int], sampling: SamplingConfig, max_new_tokens: int, seed: int) -> Outcome:
        body = {"prompt": list(prompt_ids), "n_predict": max_new_tokens, "cache_prompt": False, "seed": seed,
                "return_tokens": True, "min_p": 0.0, "repeat_penalty": 1.0, "top_k": 0, "top_p": 1.0,
                "temperature": 0.0}
        if not sampling.greedy:
            body |= {"temperature": sampling.temperature, "top_k": sampling.top_k or 0,
                     "top_p": sampling.top_p if sampling.top_p is not None else 1.0}
        start = time.perf_counter()
        answer = server.complete(body)
        return Outcome([int(t) for t in answer["tokens"]], time.perf_counter() - start)

    return Method(name, "llama.cpp", run, draft, gamma, "llama-server")
