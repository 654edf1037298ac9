"""The ONNX export kept on disk: a restart uses it without the exporting child; a changed or corrupt one re-exports.

The exporter is a command handed to ``OnnxCache``: these tests hand in
programs that fail (so a load that succeeds did not run it) or that copy an
export (a fast stand-in for the torch child, tested in
test_sentence_model.py). The export copied is made here from the bundled
model's packaged graph, so no test here needs torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from proxy.memory.search.embedder import OnnxUnavailable
from proxy.memory.search.embedder.export_files import GRAPH, META, PROBE_VECTORS, PROBES, TOKENIZER
from proxy.memory.search.embedder.onnx_cache import MANIFEST, OnnxCache, model_key
from proxy.memory.search.embedder.onnx_encoder import OnnxEncoder
from proxy.memory.search.embedder.packaged_model import (
    DIM,
    INPUTS,
    configured_tokenizer,
    pinned_file,
)
from proxy.memory.search.embedder.packaged_model import GRAPH as PACKAGED_GRAPH
from proxy.memory.search.embedder.packaged_model import TOKENIZER as PACKAGED_TOKENIZER

NEVER = (sys.executable, "-c", "import sys; sys.exit('the exporter ran')")
PROBE = ["peanut allergy", "the weather is nice"]


def copies(source: Path) -> tuple[str, ...]:
    """An exporter that writes the files of the real export in ``source`` (argv: MODEL OUT_DIR)."""
    code = (
        "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[3], dirs_exist_ok=True,"
        f" ignore=shutil.ignore_patterns({MANIFEST!r}))"
    )
    return (sys.executable, "-c", code, str(source))


def entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the exporting child writes, for the packaged graph: graph, tokenizer, probe vectors, meta."""
    folder = tmp_path_factory.mktemp("export")
    graph, tokenizer = pinned_file(*PACKAGED_GRAPH), configured_tokenizer(pinned_file(*PACKAGED_TOKENIZER))
    (folder / GRAPH).write_bytes(graph)
    (folder / TOKENIZER).write_text(tokenizer)
    np.save(folder / PROBE_VECTORS, OnnxEncoder(graph, tokenizer, INPUTS, DIM).encode(list(PROBES)))
    (folder / META).write_text(json.dumps({"dim": DIM, "inputs": INPUTS}))
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A model folder: the cache keys an export by its files."""
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    return str(folder)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, export: Path, model: str) -> Path:
    """A cache folder holding ``model``'s export."""
    folder = tmp_path_factory.mktemp("onnx")
    OnnxCache(folder, command=copies(export)).load(model)
    return folder


@pytest.fixture(scope="module")
def entry(exported: Path) -> Path:
    [found] = entries(exported)
    return found


def test_a_second_load_uses_the_cache_without_the_child(exported: Path, entry: Path, model: str) -> None:
    assert entry.name == model_key(Path(model))
    assert json.loads((entry / MANIFEST).read_text())["sha256"][GRAPH]
    encoder = OnnxCache(exported, command=NEVER).load(model)
    again = OnnxCache(exported, command=NEVER).load(model)
    np.testing.assert_array_equal(encoder.encode(PROBE), again.encode(PROBE))
    assert entries(exported) == [entry]  # nothing added, nothing left behind


def test_what_a_killed_export_left_is_swept(exported: Path, entry: Path, model: str) -> None:
    stale, live = exported / ".export-killed", exported / ".export-running"
    for work in (stale, live):
        work.mkdir()
        (work / GRAPH).write_bytes(b"half a graph")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    OnnxCache(exported, command=NEVER).load(model)
    assert not stale.exists()
    assert live.exists()  # may be another process's export in progress
    shutil.rmtree(live)
    assert entries(exported) == [entry]


def test_a_changed_model_misses(exported: Path, tmp_path: Path, model: str) -> None:
    linked = tmp_path / "model"
    linked.mkdir()
    for file in Path(model).iterdir():
        (linked / file.name).symlink_to(file, target_is_directory=file.is_dir())
    OnnxCache(exported, command=NEVER).load(str(linked))  # the same files: the same entry
    (linked / "config.json").unlink()
    (linked / "config.json").write_text('{"model_type": "bert", "fine_tuned": true}')
    with pytest.raises(OnnxUnavailable, match="the exporter ran"):
        OnnxCache(exported, command=NEVER).load(str(linked))


@pytest.mark.parametrize("damage", ["graph", "manifest", "probes", "missing"])
def test_a_corrupt_entry_is_exported_again(
    entry: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture, model: str
) -> None:
    folder = tmp_path / "onnx"
    shutil.copytree(entry, folder / entry.name)
    copy = folder / entry.name
    if damage == "graph":
        blob = bytearray((copy / GRAPH).read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        (copy / GRAPH).write_bytes(bytes(blob))
    elif damage == "manifest":
        (copy / MANIFEST).write_text('{"sha2')  # a crash mid-write, were it not for the rename
    elif damage == "probes":
        np.save(copy / PROBE_VECTORS, -np.load(copy / PROBE_VECTORS))  # checksum made to match below
        sums = json.loads((copy / MANIFEST).read_text())
        sums["sha256"][PROBE_VECTORS] = hashlib.sha256((copy / PROBE_VECTORS).read_bytes()).hexdigest()
        (copy / MANIFEST).write_text(json.dumps(sums))
    else:
        (copy / GRAPH).unlink()
    with pytest.raises(OnnxUnavailable, match="the exporter ran"), caplog.at_level(logging.WARNING):
        OnnxCache(folder, command=NEVER).load(model)  # detected: the exporter runs
    assert any("unusable" in r.getMessage() for r in caplog.records)
    assert entries(folder) == []  # the bad entry is gone
    OnnxCache(folder, command=copies(entry)).load(model)
    OnnxCache(folder, command=NEVER).load(model)  # and the new one is good


def test_vectors_unlike_torch_are_refused(entry: Path, tmp_path: Path, model: str) -> None:
    wrong = tmp_path / "wrong"
    shutil.copytree(entry, wrong)
    np.save(wrong / PROBE_VECTORS, np.roll(np.load(wrong / PROBE_VECTORS), 1, axis=1))
    with pytest.raises(OnnxUnavailable, match="min cosine"):
        OnnxCache(tmp_path / "onnx", command=copies(wrong)).load(model)
    assert entries(tmp_path / "onnx") == []  # never cached


def test_processes_starting_together_share_one_entry(entry: Path, tmp_path: Path, model: str) -> None:
    folder = tmp_path / "onnx"
    with ThreadPoolExecutor(3) as pool:
        encoders = list(pool.map(lambda _: OnnxCache(folder, command=copies(entry)).load(model), range(3)))
    assert [e.name for e in entries(folder)] == [entry.name]  # one entry, no temporary folder left
    for encoder in encoders:
        np.testing.assert_allclose(encoder.encode(PROBE), encoders[0].encode(PROBE), atol=1e-6)
    OnnxCache(folder, command=NEVER).load(model)


def test_an_unwritable_cache_folder_still_exports(tmp_path: Path, caplog: pytest.LogCaptureFixture, model: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OnnxUnavailable, match="the exporter ran"), caplog.at_level(logging.WARNING):
        OnnxCache(blocker / "onnx", command=NEVER).load(model)
    assert any("not cached" in r.getMessage() for r in caplog.records)


def test_the_key_follows_names_and_contents_not_hidden_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sub" / "weights.bin").write_bytes(b"\x00\x01")
    key = model_key(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    assert model_key(tmp_path) == key
    (tmp_path / "sub" / "weights.bin").write_bytes(b"\x00\x02")
    changed = model_key(tmp_path)
    assert changed != key
    (tmp_path / "sub" / "weights.bin").rename(tmp_path / "sub" / "other.bin")
    assert model_key(tmp_path) not in (key, changed)


def test_hub_blobs_are_keyed_by_their_names(tmp_path: Path) -> None:
    # The Hugging Face cache: snapshots/<rev>/file -> ../../blobs/<content hash>.
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    (blobs / "1111").write_bytes(b"same bytes")
    (snapshot / "model.safetensors").symlink_to(blobs / "1111")
    key = model_key(snapshot)
    (blobs / "2222").write_bytes(b"same bytes")
    (snapshot / "model.safetensors").unlink()
    (snapshot / "model.safetensors").symlink_to(blobs / "2222")
    assert model_key(snapshot) != key  # another blob, another model (its name is its hash)
