"""The converted copy of a GGUF file (models/converted.py): a model read back from it is bitwise the one converted,
the copy is made once and used after that, and a changed file, a changed reading or a broken copy is converted
again. On a tiny random Qwen2 GGUF file whose matrices mix Q4_K, Q5_0, Q8_0 and F32 (tests/tiny.py)."""

from __future__ import annotations

import os

import pytest
import torch
from tiny import tiny_gguf

from specdecode.cpu import capability
from specdecode.models import converted
from specdecode.models.kernels import kernel_isa, load_kernels

pytestmark = [pytest.mark.skipif(kernel_isa(capability()) is None, reason="int4-dot8 needs AVX2 (this CPU lacks it)"),
              pytest.mark.same_on_every_cpu]


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    """A tiny GGUF file, and an empty cache for its converted copies (our kernels stay in theirs)."""
    load_kernels()
    monkeypatch.setattr(converted, "cache_dir", lambda: tmp_path / "cache")
    return tiny_gguf(tmp_path / "model.gguf")


@pytest.fixture
def conversions(monkeypatch):
    """How many times a GGUF file was read (converted) rather than its copy."""
    count = [0]
    convert = converted.read_gguf

    def counted(*args, **kwargs):
        count[0] += 1
        return convert(*args, **kwargs)

    monkeypatch.setattr(converted, "read_gguf", counted)
    return count


def _tensors(parts: dict) -> dict[str, object]:
    """Everything a loaded model holds from parts, by name: tensors, and the packed matrices' scalars."""
    out = {name: parts[name] for name in ("shape", "embed", "norm")} | {"head_weight": parts["head_weight"]()}
    linears = {"head": parts["head"]}
    for i, layer in enumerate(parts["layers"]):
        out |= {f"{i}.{name}": getattr(layer, name) for name in converted.NORMS}
        linears |= {f"{i}.{name}": getattr(layer, name) for name in converted.LINEARS}
    for prefix, linear in linears.items():
        out[f"{prefix}.bias"] = linear.bias
        out[f"{prefix}.out"] = linear.out_features
        for j, part in enumerate(linear.parts):
            out |= {f"{prefix}.{j}.{name}": getattr(part, name) for name in
                    ("w", "sub", "sup", "bits", "out_features", "in_features", "unscale")}
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], torch.Tensor):
            assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name
        else:
            assert a[name] == b[name], name


@pytest.mark.parametrize("head", [None, "Q8_0", "F32"], ids=["tied head", "Q8_0 head", "F32 head"])
@pytest.mark.parametrize("keep_finer", [True, False], ids=["target", "draft"])
def test_a_model_read_from_its_copy_is_bitwise_the_converted_one(tmp_path, gguf, conversions, keep_finer, head):
    if head is not None:
        gguf = tiny_gguf(tmp_path / "untied.gguf", head=head)
    first = converted.read(gguf, "int4-dot8", keep_finer=keep_finer)
    saved = converted.entry(gguf, keep_finer)
    assert conversions[0] == 1 and saved.is_file()
    again = converted.read(gguf, "int4-dot8", keep_finer=keep_finer)
    assert conversions[0] == 1  # read back, not converted
    _assert_same(_tensors(first), _tensors(again))
    x = torch.randn(3, first["shape"].hidden)
    assert torch.equal(first["head"](x), again["head"](x))  # the packed parts run as they did


def test_a_changed_file_is_converted_again_and_its_old_copy_removed(gguf, conversions):
    assert converted.entry(gguf, True) != converted.entry(gguf, False)  # a target's and a draft's reading apart
    converted.read(gguf, "int4-dot8")
    old = converted.entry(gguf, True)
    stat = gguf.stat()
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file changed
    converted.read(gguf, "int4-dot8")
    assert conversions[0] == 2 and converted.entry(gguf, True).is_file() and not old.exists()


def test_a_broken_copy_is_converted_again_with_a_warning(gguf, conversions, capsys):
    first = converted.read(gguf, "int4-dot8")
    saved = converted.entry(gguf, True)
    saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])  # cut short
    again = converted.read(gguf, "int4-dot8")
    assert conversions[0] == 2 and "cannot be read" in capsys.readouterr().err
    _assert_same(_tensors(first), _tensors(again))
    assert converted.read(gguf, "int4-dot8") is not None and conversions[0] == 2  # the new copy is used


def test_other_formats_are_not_saved(gguf, monkeypatch):
    monkeypatch.setattr(converted, "read_gguf", lambda path, fmt, progress, keep_finer: {"format": fmt})
    assert converted.read(gguf, "int8") == {"format": "int8"}
    assert not converted.entry(gguf, True).parent.exists()
