"""The exported model kept on disk between starts, keyed by a hash of the model's files.

A cache entry is a folder ``<cache_dir>/onnx/<key>`` holding what the
exporting child writes (``export_files``) and a ``manifest.json`` with the
sha256 of each file. An entry is made in a temporary folder beside it and
renamed into place once checked, so a process never sees half an entry; two
processes starting together both export, the first rename wins and the
other uses its own copy. What a process killed mid-export leaves is swept
once older than any live export. An entry whose files no longer match the
manifest, that fails to load, or whose vectors no longer match the probes
is moved aside and exported again. The model's files name the entry, so a
changed model (or a new ``EXPORT_RECIPE``) misses and exports afresh; old
entries stay until the folder is cleared by hand (~90 MB each for a
MiniLM-sized model).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ....errors import OnnxUnavailable
from . import export_files
from .onnx_encoder import OnnxEncoder

log = logging.getLogger("paperclip.embedder")

# Part of every key: bump it when onnx_export writes a different graph or files.
EXPORT_RECIPE = "2"  # 2: attention and layer norms fused (onnx_export._fused)
# The exported graph must reproduce torch's vectors on the probes at each load.
MIN_PROBE_COSINE = 0.9999
QUICK_PROBE_CHARS = 100
# The child process loads torch and the model and exports: seconds, not minutes.
EXPORT_TIMEOUT_S = 300.0
EXPORT_COMMAND = (sys.executable, "-m", "proxy.memory.search.embedder.onnx_export")
MANIFEST = "manifest.json"



class OnnxCache:
    """Loads a model's exported encoder from ``folder``, exporting it there first if needed.

    ``folder`` None keeps nothing between starts (every load exports).
    ``command`` is the exporting child's command line (``MODEL OUT_DIR`` are
    appended): tests hand in another program to see when it runs.
    """

    def __init__(self, folder: Path | None, command: tuple[str, ...] = EXPORT_COMMAND) -> None:
        self.folder = folder
        self.command = command

    def load(self, model: str) -> OnnxEncoder:
        """The checked encoder for ``model`` (a folder or a hub name); raises OnnxUnavailable."""
        entry = self._entry(model)
        if entry is not None and entry.is_dir():
            try:
                encoder = _open(entry, _manifest(entry), thorough=False)
            except Exception as exc:
                log.warning("the cached ONNX export %s is unusable (%r): exporting again", entry, exc)
                _evict(entry)
            else:
                log.info("embedding model runs on ONNX Runtime (cached export %s)", entry)
                return encoder
        return self._export(model, entry)

    def _entry(self, model: str) -> Path | None:
        if self.folder is None:
            return None
        files = model_files(model)
        if files is None:
            log.info("the ONNX export of %s is not cached: its files are not in a local folder", model)
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("the ONNX export is not cached: cannot make %s: %s", self.folder, exc)
            return None
        _sweep(self.folder)
        return self.folder / model_key(files)

    def _export(self, model: str, entry: Path | None) -> OnnxEncoder:
        work = Path(tempfile.mkdtemp(prefix=".export-", dir=None if entry is None else entry.parent))
        try:
            _run_child(self.command, model, work)
            try:
                encoder = _open(work, None, thorough=True)
            except OnnxUnavailable:
                raise
            except Exception as exc:
                raise OnnxUnavailable(f"it failed on ONNX Runtime: {exc!r}") from exc
            (work / MANIFEST).write_text(json.dumps({"sha256": _digests(work)}))
            if entry is not None:
                _publish(work, entry)
        finally:
            shutil.rmtree(work, ignore_errors=True)  # gone already once renamed
        log.info("embedding model runs on ONNX Runtime (exported now%s)", f", kept in {entry}" if entry else "")
        return encoder


def model_files(model: str) -> Path | None:
    """The local folder of ``model``: itself, or its snapshot in the Hugging Face cache; None if neither."""
    path = Path(model)
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:
        return None


def model_key(folder: Path) -> str:
    """A hash of every file under ``folder`` (names and contents) and of ``EXPORT_RECIPE``."""
    digest = hashlib.sha256(f"recipe {EXPORT_RECIPE}\n".encode())
    for relative in sorted(_files(folder)):
        digest.update(f"{relative} {_file_digest(folder / relative)}\n".encode())
    return digest.hexdigest()[:32]


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` (symbolic links followed), hidden ones (``.git``...) left out."""
    found = []
    for parent, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        where = Path(parent).relative_to(folder)
        found += [(where / f).as_posix() for f in files if not f.startswith(".")]
    return found


def _file_digest(path: Path) -> str:
    target = path.resolve()
    if path.is_symlink() and target.parent.name == "blobs":
        return target.name  # the Hugging Face cache names its blobs by their content hash
    with target.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _run_child(command: tuple[str, ...], model: str, out: Path) -> None:
    try:
        done = subprocess.run(
            [*command, model, str(out)],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OnnxUnavailable(f"the ONNX export did not run: {exc!r}") from exc
    reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    if done.returncode == export_files.UNSUPPORTED:
        raise OnnxUnavailable(f"no ONNX export for {reason}", expected=True)
    if done.returncode != 0:
        raise OnnxUnavailable(f"the ONNX export failed: {reason}")


def _manifest(entry: Path) -> dict[str, str]:
    sums = json.loads((entry / MANIFEST).read_text())["sha256"]
    if not isinstance(sums, dict) or set(sums) != set(export_files.FILES):
        raise ValueError("the manifest does not list the export's files")
    return {str(k): str(v) for k, v in sums.items()}


def _digests(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in export_files.FILES}


def _open(folder: Path, sums: dict[str, str] | None, *, thorough: bool) -> OnnxEncoder:
    """The encoder in ``folder``, its files checked against ``sums`` and its vectors against the probes.

    ``thorough`` (a fresh export): every probe, batched and one at a time.
    Otherwise (the files are the checked ones, by their checksums; only this
    ONNX Runtime may differ) the probes of up to ``QUICK_PROBE_CHARS``, in
    one batch: the long probe alone cost ~0.8 s of a start under load.
    """
    data = {name: (folder / name).read_bytes() for name in export_files.FILES}
    if sums is not None:
        for name, blob in data.items():
            if hashlib.sha256(blob).hexdigest() != sums[name]:
                raise ValueError(f"{name} does not match its checksum")
    meta = json.loads(data[export_files.META])
    encoder = OnnxEncoder(
        data[export_files.GRAPH], data[export_files.TOKENIZER].decode(), list(meta["inputs"]), int(meta["dim"])
    )
    expected = np.load(io.BytesIO(data[export_files.PROBE_VECTORS]))
    rows = [i for i, p in enumerate(export_files.PROBES) if thorough or len(p) <= QUICK_PROBE_CHARS]
    probes = [export_files.PROBES[i] for i in rows]
    runs = [encoder.encode(probes)]  # padded batches, on the workers
    if thorough:
        runs.append(np.concatenate([encoder.encode([p]) for p in probes]))  # one at a time
    cosine = float(min(np.min(np.sum(expected[rows] * v, axis=1)) for v in runs))
    if not cosine >= MIN_PROBE_COSINE:
        raise OnnxUnavailable(f"ONNX Runtime vectors differ from torch's (min cosine {cosine:.6f})")
    return encoder


def _publish(work: Path, entry: Path) -> None:
    # Fails when another process published the same export first: its copy is as good.
    with contextlib.suppress(OSError):
        os.rename(work, entry)


def _sweep(folder: Path) -> None:
    """Remove what a process killed mid-export left: temporary folders older than any live export."""
    for work in folder.glob(".export-*"):
        with contextlib.suppress(OSError):
            if time.time() - work.stat().st_mtime > 2 * EXPORT_TIMEOUT_S:
                shutil.rmtree(work, ignore_errors=True)


def _evict(entry: Path) -> None:
    aside = entry.with_name(f".evicted-{entry.name}-{os.getpid()}")
    try:
        os.rename(entry, aside)
    except OSError:
        return  # another process moved it already
    shutil.rmtree(aside, ignore_errors=True)
