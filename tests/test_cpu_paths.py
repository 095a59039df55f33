"""Every CPU path, on whichever machine runs the suite: the engine tests run again in a fresh process with
SPECDECODE_CPU=avx2 (torch's AVX2 kernels, oneDNN capped at AVX2: no native bf16 matmuls, as on an AVX2-only EPYC)
and the default target forced onto the native engine, so that a green run on an AVX-512 machine says the AVX2 path
works too. (On an AVX2 machine the same run is the main path again.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], timeout: int, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=os.environ | env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_forced_avx2_path_reports_itself_and_picks_int8():
    result = _run(["-m", "specdecode", "info", "--no-measure", "--json"], 120, SPECDECODE_CPU="avx2")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["torch_kernels"] == "AVX2" and info["native_bf16"] is False and info["forced"] == "avx2"
    assert info["native_format"] == "int8" and info["kernel_path"] == "avx2"


def test_the_forced_avx512_path_keeps_the_products_off_amx_tiles():
    """SPECDECODE_CPU=avx512 is what an AVX-512 EPYC runs: VNNI products, no AMX (tests/test_dot8.py checks that the
    tiles give VNNI's bits where the CPU has both)."""
    result = _run(["-m", "specdecode", "info", "--no-measure", "--json"], 120, SPECDECODE_CPU="avx512")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["forced"] == "avx512" and info["kernel_path"] in ("avx512-vnni", "avx2")


def test_an_unknown_forced_path_is_a_one_line_error():
    result = _run(["-m", "specdecode", "info", "--no-measure"], 120, SPECDECODE_CPU="avx9000")
    assert result.returncode == 2
    assert "SPECDECODE_CPU='avx9000' names no CPU path" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _own_path_is_avx2() -> bool:
    """This CPU already runs what SPECDECODE_CPU=avx2 forces: torch's AVX2 kernels, no native bf16, AVX2 products."""
    from specdecode.cpu import capability
    from specdecode.models.kernels import kernel_isa

    cpu = capability()
    return cpu.isa == "AVX2" and not cpu.bf16_matmul and kernel_isa(cpu) == "avx2"


def test_the_engine_tests_pass_on_the_forced_avx2_path():
    """test_native.py (every weight format that runs without native bf16), test_default_model.py (greedy identity
    with the default target on the native engine), test_dot8.py and test_attention_kernel.py (our kernels on AVX2
    alone), test_real_pair.py (agreement with llama.cpp, greedy identity, torch's int4 kernel) and
    test_prompt_path.py (int8 twins: no AVX2 CPU gets another prompt path), AVX2 kernels.
    Tests marked same_on_every_cpu (Python-side packing, the CLI, every other draft type, torch's own model code:
    ~6 min of a 10-minute rerun) run in the main pass only. On a CPU whose own path is AVX2 the main pass has run
    all of them on that path already: only test_default_model.py, whose default target the rerun moves from
    llama.cpp onto the native engine, runs again."""
    files = ["tests/test_default_model.py"] if _own_path_is_avx2() else [
        "tests/test_native.py", "tests/test_default_model.py", "tests/test_dot8.py", "tests/test_attention_kernel.py",
        "tests/test_real_pair.py", "tests/test_prompt_path.py"]
    result = _run(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not same_on_every_cpu", *files], 1500,
                  SPECDECODE_CPU="avx2", SPECDECODE_ENGINE="native")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.strip().splitlines()[-1]
