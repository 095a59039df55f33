"""A GGUF model on llama.cpp (through llama-cpp-python) behind `CausalLM`: the file runs as shipped, quantized.

extend(k tokens) is one `llama_decode` of a k-token batch with logits requested for the rows wanted; rollback is
`llama_memory_seq_rm` of the cache's tail, done lazily: until a pass needs the cells, the tail stays, and a pass
whose leading tokens equal it (a prompt that starts like the last one: the chat template's system prompt) reuses
them instead of recomputing them, as llama.cpp's own loop does. That is exact because the passes are batch
invariant (below). llama.cpp keeps its own KV cache (f16) and threads.

Batch invariance: built as bin/bootstrap builds it (without llamafile's sgemm and without weight repacking), a
k-token pass computes every row bitwise as a 1-token pass does, so greedy speculative output equals plain greedy
output on this engine too. A default build is not invariant (rows differ by up to ~0.8 in logit units); a check at
load time (`batch_invariant`, a few milliseconds) tells the two apart.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import torch

from ..errors import first_line
from .base import CausalLM

INSTALL_HINT = "run bin/bootstrap llama-cpp (it builds llama-cpp-python 0.3.36 from source, 3-5 minutes on 2 cores)"


class MissingBinding(ValueError):
    """llama-cpp-python is not installed, or its compiled library does not load."""


def binding():
    """The llama_cpp module, or a one-line error naming the install step."""
    try:
        import llama_cpp
    except (ImportError, OSError) as error:  # OSError: the shared library is missing or built for another CPU
        raise MissingBinding(f"the llama.cpp engine needs llama-cpp-python ({first_line(error)}): {INSTALL_HINT}"
                             ) from None
    return llama_cpp


def available() -> bool:
    try:
        binding()
    except MissingBinding:
        return False
    return True


class Context:
    """One llama.cpp context on a GGUF file, sequence 0 only: every call this engine makes into llama-cpp-python.

    All on the binding's public names: `Llama` loads the file and owns the model and context (freed with it), its
    `ctx` and `model` properties give their pointers, and the rest are llama.h's own functions as `llama_cpp`
    exports them. The batch is ours (`llama_batch_init`), so that the rows whose logits are wanted are ours to say.
    """

    def __init__(self, path: Path, max_length: int, max_batch: int, threads: int):
        self._batch = None  # until it is allocated, last: nothing for __del__ to free if loading fails
        self._lib = lib = binding()
        self._llama = lib.Llama(str(path), n_ctx=max_length, n_batch=max_batch, n_ubatch=max_batch,
                                n_threads=threads, n_threads_batch=threads, verbose=False)  # ValueError if it fails
        self._ctx = self._llama.ctx
        self._memory = lib.llama_get_memory(self._ctx)
        self.vocab_size = int(self._llama.n_vocab())
        self.max_length = int(self._llama.n_ctx())
        self._batch = lib.llama_batch_init(max_batch, 0, 1)

    def __del__(self):
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None

    def model_bytes(self) -> int:
        return int(self._lib.llama_model_size(self._llama.model))

    def forget(self, start: int) -> None:
        """Remove the cells at positions start and after."""
        self._lib.llama_memory_seq_rm(self._memory, 0, start, -1)

    def decode(self, tokens: list[int], start: int, want: list[bool]) -> None:
        """One pass of tokens at positions start, start + 1, ...; want[i]: keep row i's logits. A failed pass
        leaves no cells behind."""
        batch = self._batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = want[i]
        status = self._lib.llama_decode(self._ctx, batch)
        if status != 0:
            self.forget(start)
            raise RuntimeError(f"llama_decode failed with status {status}")

    def logits(self, rows: int) -> torch.Tensor:
        """The last pass's wanted rows of logits, copied: float32 [rows, V]."""
        pointer = self._lib.llama_get_logits(self._ctx)
        flat = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)),
                                     shape=(rows * self.vocab_size,))
        return torch.from_numpy(flat.copy()).view(rows, self.vocab_size)


class LlamaCppLM(CausalLM):
    """A GGUF file on llama.cpp. Batch size 1; logits are returned as float32 [k, V]."""

    verify_slope = 0.6  # T(k) / T(1) - 1 per extra token: a pass of k tokens costs nearly k passes on 2 cores
    # torch's threads, spinning after each small op between passes, slow llama.cpp's own threads down (8.8 ms a
    # pass with torch on 2 threads, 7.7 ms with torch on 1, on 2 cores): callers give torch this many beside it.
    torch_threads = 1

    def __init__(self, path: str | Path, max_length: int = 4096, threads: int | None = None,
                 name: str | None = None, max_batch: int = 512):
        binding()  # a missing binding is said before anything about the file
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"GGUF file {str(path)!r} does not exist")
        threads = threads or torch.get_num_threads()  # the process's thread setting (`--threads`)
        try:
            self._context = Context(path, max_length, max_batch, threads)
        except ValueError as error:
            raise ValueError(f"llama.cpp cannot load {str(path)!r}: {error}") from None
        self.name = name or path.stem
        self.path = path
        self.vocab_size = self._context.vocab_size
        self.max_length = self._context.max_length
        self.max_batch = max_batch
        self.threads = threads
        self._length = 0
        self._cached: list[int] = []  # the tokens whose keys and values llama.cpp holds (>= self._length of them)
        self.batch_invariant = self._check_batch_invariance()

    @property
    def length(self) -> int:
        return self._length

    @property
    def weight_bytes(self) -> int:
        """Bytes of the GGUF file's tensors (what one pass reads, less the embedding rows it looks up)."""
        return self._context.model_bytes()

    def _check_batch_invariance(self) -> bool:
        """Whether a 4-token pass gives bitwise the rows of four 1-token passes (the cache is left empty)."""
        probe = torch.tensor([1, 400, 2000, 31, 7, 999, 12, 13]) % self.vocab_size
        self.extend(probe[:4], keep=1)
        together = self.extend(probe[4:])
        self.rollback(4)
        alone = torch.cat([self.extend(probe[i:i + 1]) for i in range(4, 8)])
        self.rollback(0)
        return bool(torch.equal(together, alone))

    def extend(self, tokens: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        ids = tokens.view(-1).tolist()
        k = len(ids)
        if self._length + k > self.max_length:
            raise ValueError(f"the context window ({self.max_length} tokens) is full")
        out = min(keep or k, k)
        # Reuse the cached tail where it matches, up to the first row whose logits are wanted.
        reused, cached = 0, self._cached
        while reused < k - out and self._length + reused < len(cached) and cached[self._length + reused] == ids[reused]:
            reused += 1
        self._length += reused
        if len(cached) > self._length:
            self._context.forget(self._length)
            del cached[self._length:]
        rows = []
        for first in range(reused, k, self.max_batch):  # a long prefill goes in batches of max_batch
            chunk = ids[first:first + self.max_batch]
            want = [first + i >= k - out for i in range(len(chunk))]
            rows.append(self._decode(chunk, want))
        return torch.cat([r for r in rows if r.numel()])  # [out, V]

    def _decode(self, chunk: list[int], want: list[bool]) -> torch.Tensor:
        self._context.decode(chunk, self._length, want)
        self._cached += chunk
        self._length += len(chunk)
        wanted = sum(want)
        return self._context.logits(wanted) if wanted else torch.empty(0, self.vocab_size)

    def clear(self) -> None:
        """Empty the cache, its reusable tail included (a cold start, as the bench times every method)."""
        self._context.forget(0)
        self._cached.clear()
        self._length = 0

    def rollback(self, length: int) -> None:
        if not 0 <= length <= self._length:
            raise ValueError(f"cannot roll back to {length}: the cache holds {self._length} tokens")
        self._length = length  # the cells past it go when a pass needs them (see the module docstring)
