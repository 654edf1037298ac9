"""Text embedders: what one is, how ``embedding.model`` picks one, and the ways a model runs.

    protocol        Embedder (texts -> unit vectors), Vectors, Cached (recent vectors by text)
    registry        load_embedder: ``embedding.model`` / ``backend`` / ``cache_dir``
    hashing         HashEmbedder, the deterministic fake
    packaged_model  BundledEmbedder: the all-MiniLM-L6-v2 graph a package ships, sha256-pinned
    onnx_encoder    an ONNX graph on ONNX Runtime (the bundled one, or an export)
    sentence_model  another sentence-transformers model, ONNX Runtime or torch underneath
    torch_encoder   such a model on torch in this process (and memory.rerank's cross-encoder)
    onnx_export     the child process that exports it to ONNX (imports torch)
    export_files    what that child hands the parent: file names, probe texts, exit status
    onnx_cache      the export kept on disk, keyed by the model's files

torch, sentence-transformers and onnx come with the ``sentence-transformers``
extra; the bundled model and the hashing fake need none of them. Import from
here; the modules are private to the package.
"""

from ....errors import ModelFileMismatch, OnnxUnavailable
from .embedder_protocol import Cached, Embedder, Vectors
from .hashing_embedder import HashEmbedder
from .packaged_model import BUNDLED_NAME, BundledEmbedder
from .registry import load_embedder
from .sentence_model import BACKENDS, Backend, SentenceTransformerEmbedder
from .torch_encoder import load_sentence_transformer

__all__ = [
    "BACKENDS",
    "BUNDLED_NAME",
    "Backend",
    "BundledEmbedder",
    "Cached",
    "Embedder",
    "HashEmbedder",
    "ModelFileMismatch",
    "OnnxUnavailable",
    "SentenceTransformerEmbedder",
    "Vectors",
    "load_embedder",
    "load_sentence_transformer",
]
