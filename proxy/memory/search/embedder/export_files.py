"""What the exporting child hands the parent: the files it writes, the probe texts, its exit status.

Kept apart from ``onnx_export`` so that the parent never imports the child's
module (``python -m`` would then find it imported already).
"""

from __future__ import annotations

# The child's exit status for a model of a shape it does not export.
UNSUPPORTED = 3
GRAPH, TOKENIZER, PROBE_VECTORS, META = "model.onnx", "tokenizer.json", "probes.npy", "meta.json"
FILES = (GRAPH, TOKENIZER, PROBE_VECTORS, META)
# Torch's vectors of these go in PROBE_VECTORS; the parent checks its own
# against them: short, odd spacing and case, Chinese, empty, longer than
# max_seq_length (truncation), one word.
PROBES = (
    "peanut allergy",
    "  The QUICK brown fox jumps over the lazy dog!  ",
    "我对花生过敏，但是很喜欢吃杏仁。",
    "",
    " ".join(["a very long note about the project schedule and its many meetings"] * 40),
    "short",
)
