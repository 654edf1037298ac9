"""Text embedders: what one is, how ``embedding.model`` picks one, and the ways a model runs.

    protocol        Embedder (texts -> unit vectors), Vectors, Cached (recent vectors by text)
    registry        load_embedder: ``embedding.model`` / ``backend`` / ``cache_dir``
    hashing         HashEmbedder, the deterministic fake
    sentence_model  a sentence-transformers model, ONNX Runtime or torch underneath
    torch_encoder   the model on torch in this process (and memory.rerank's cross-encoder)
    onnx_export     the child process that exports it to ONNX (imports torch)
    export_files    what that child hands the parent: file names, probe texts, exit status
    onnx_cache      the export kept on disk, keyed by the model's files
    onnx_encoder    the exported graph on ONNX Runtime

Import from here; the modules are private to the package.
"""

from ....errors import OnnxUnavailable
from .embedder_protocol import Cached, Embedder, Vectors
from .hashing_embedder import HashEmbedder
from .registry import load_embedder
from .sentence_model import BACKENDS, BUNDLED_NAME, Backend, SentenceTransformerEmbedder
from .torch_encoder import load_sentence_transformer

__all__ = [
    "BACKENDS",
    "BUNDLED_NAME",
    "Backend",
    "Cached",
    "Embedder",
    "HashEmbedder",
    "OnnxUnavailable",
    "SentenceTransformerEmbedder",
    "Vectors",
    "load_embedder",
    "load_sentence_transformer",
]
