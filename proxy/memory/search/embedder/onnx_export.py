"""Exporting a sentence-transformers model to ONNX, in a child process.

    python -m proxy.memory.search.embedder.onnx_export MODEL OUT_DIR

loads MODEL with sentence-transformers (torch, one thread) and writes to
OUT_DIR: ``model.onnx`` (the encoder, token embeddings out),
``tokenizer.json`` (the model's fast tokenizer with its truncation and
padding set, for the ``tokenizers`` library), ``probes.npy`` (torch's vectors
of ``PROBES``, which the parent checks its own against) and ``meta.json``
(``dim``, ``inputs``). Exit status 0 on success, ``UNSUPPORTED`` with the
reason on stderr for a model of another shape, anything else on failure.

A child process, so that the proxy itself never imports torch: torch and
the export leave ~500 MB resident that the proxy would carry for good. The
parent (``onnx_cache``) keeps what it writes between starts.
"""

from __future__ import annotations

import io
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .export_files import GRAPH, META, PROBE_VECTORS, PROBES, TOKENIZER, UNSUPPORTED
from .onnx_encoder import features


def export(model: str, out: Path) -> str | None:
    """Write the files above for ``model`` (a path or a name) into ``out``; the reason when unsupported."""
    from .torch_encoder import dimension, load_sentence_transformer

    st_model = load_sentence_transformer(model)
    reason = onnx_unsupported(st_model)
    if reason is not None:
        return reason
    transformer = st_model[0]
    tokenizer = _fast_tokenizer(transformer)
    inputs = list(transformer.tokenizer.model_input_names)
    example = features(tokenizer, list(PROBES[:2]), inputs)
    fusable = _fusable(transformer.auto_model)
    if fusable:
        # The fusion below recognises the eager attention's graph, not SDPA's.
        transformer.auto_model.set_attn_implementation("eager")
    graph = _export(transformer.auto_model, inputs, example)
    (out / GRAPH).write_bytes(_fused(graph, transformer.auto_model.config) if fusable else graph)
    tokenizer.save(str(out / TOKENIZER))
    vectors = st_model.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True)
    np.save(out / PROBE_VECTORS, np.asarray(vectors, dtype=np.float32))
    meta = {"dim": dimension(st_model), "inputs": inputs}
    (out / META).write_text(json.dumps(meta))
    return None


def _fast_tokenizer(transformer: Any) -> Any:
    """The model's ``tokenizers.Tokenizer`` with sentence-transformers' truncation and right padding."""
    from tokenizers import Tokenizer

    hf = transformer.tokenizer
    tokenizer = Tokenizer.from_str(hf.backend_tokenizer.to_str())  # a copy: the model's stays as it was
    limit = transformer.max_seq_length
    if isinstance(limit, int) and limit < 2**31:  # a tokenizer without a limit reports a huge one
        tokenizer.enable_truncation(max_length=limit)
    else:
        tokenizer.no_truncation()
    tokenizer.enable_padding(
        direction="right", pad_id=hf.pad_token_id, pad_token=hf.pad_token, pad_type_id=hf.pad_token_type_id
    )
    return tokenizer


def onnx_unsupported(model: Any) -> str | None:
    """Why ``model`` (a SentenceTransformer) cannot run as the exported graph; None if it can.

    Supported: exactly a plain ``Transformer`` (a Hugging Face encoder fed by
    its tokenizer, token embeddings out), ``Pooling`` averaging the tokens
    and nothing else, then optionally ``Normalize``; no prompt, no output
    truncation. Anything else (another pooling, a Dense layer, a CLIP model,
    a lower-casing or flattening Transformer...) stays on torch.
    """
    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return f"module stack {names}"
    if not all(type(m).__module__.startswith("sentence_transformers.") for m in modules):
        return "modules not from sentence_transformers"
    if getattr(model, "default_prompt_name", None) is not None:
        return "a default prompt"
    if getattr(model, "truncate_dim", None) is not None:
        return "truncate_dim"
    return _transformer_unsupported(modules[0]) or _pooling_unsupported(modules[1])


def _transformer_unsupported(transformer: Any) -> str | None:
    import inspect

    import torch
    from transformers import PreTrainedTokenizerBase

    tokenizer = getattr(transformer, "tokenizer", None)
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        return "no text tokenizer"
    if getattr(transformer, "processor", tokenizer) is not tokenizer:
        return "a multimodal processor"
    if tokenizer.padding_side != "right":
        return "left padding"
    if getattr(transformer, "do_lower_case", False):
        return "do_lower_case"
    if getattr(transformer, "processing_kwargs", None):
        return "custom processing"
    if getattr(transformer, "query_expansion", None):
        return "query expansion"
    if getattr(transformer, "can_flatten_inputs", False):
        return "flattened (unpadded) inputs"
    modality = getattr(transformer, "modality_config", None)
    if modality is not None and modality != {
        "text": {"method": "forward", "method_output_name": "last_hidden_state"}
    }:
        return f"modality config {modality}"
    auto_model = getattr(transformer, "auto_model", None)
    if not isinstance(auto_model, torch.nn.Module):
        return "no torch model"
    config = getattr(auto_model, "config", None)
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        return "not an encoder"
    inputs = list(tokenizer.model_input_names)
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        return f"tokenizer inputs {inputs}"
    params = inspect.signature(auto_model.forward).parameters
    if any(name not in params for name in inputs):
        return f"the model does not take {inputs}"
    return None


def _pooling_unsupported(pooling: Any) -> str | None:
    config = pooling.get_config_dict()
    if "pooling_mode" in config:  # sentence-transformers >= 6
        mode = config["pooling_mode"]
        return None if mode in ("mean", ["mean"], ("mean",)) else f"pooling {mode}"
    modes = {k for k, v in config.items() if k.startswith("pooling_mode_") and v}
    return None if modes == {"pooling_mode_mean_tokens"} else f"pooling {sorted(modes)}"


def _export(auto_model: Any, inputs: list[str], example: dict[str, npt.NDArray[np.int64]]) -> bytes:
    """The encoder as ONNX bytes (in memory), taking ``inputs`` and giving last_hidden_state."""
    import torch

    # Without the extra installed, mypy sees torch as Any; with it, as typed.
    class Encoder(torch.nn.Module):  # type: ignore[misc,unused-ignore]
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, *features: torch.Tensor) -> Any:
            return self.model(**dict(zip(inputs, features, strict=True))).last_hidden_state

    # The example batch has padding, so the graph keeps the attention mask.
    args = tuple(torch.from_numpy(example[name]) for name in inputs)
    axes = {name: {0: "batch", 1: "tokens"} for name in [*inputs, "last_hidden_state"]}
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter warns about itself and about tracing.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Encoder(auto_model.eval()),
            args,
            buffer,  # type: ignore[arg-type,unused-ignore]  # typed as a path; the TorchScript exporter takes a file
            input_names=inputs,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    return buffer.getvalue()


def _fusable(auto_model: Any) -> bool:
    """A BERT encoder: ONNX Runtime's transformer optimizer fuses its attention and layer norms."""
    return getattr(auto_model.config, "model_type", None) == "bert"


def _fused(graph: bytes, config: Any) -> bytes:
    """``graph`` with each layer's attention, skip + layer norm and bias + GELU as one fused operator each.

    The same arithmetic in fewer, larger kernels (vectors within 2e-7 of the
    plain graph's; the parent's probe check still applies): ONNX Runtime runs
    46 operators instead of 338, 3-14% less CPU for a one-sentence query
    (docs/recall.md). Any failure keeps ``graph``.
    """
    import onnx

    try:
        from onnxruntime.transformers import optimizer

        model = optimizer.optimize_model(
            onnx.load_from_string(graph), model_type="bert", num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size), opt_level=0, use_gpu=False,
        )
        fused: bytes = model.model.SerializeToString()
    except Exception as exc:  # the optimizer's failure modes are not documented
        print(f"the transformer fusion failed, the plain graph is kept: {exc!r}", file=sys.stderr)
        return graph
    return fused


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m proxy.memory.search.embedder.onnx_export MODEL OUT_DIR", file=sys.stderr)
        return 2
    reason = export(argv[0], Path(argv[1]))
    if reason is not None:
        print(reason, file=sys.stderr)
        return UNSUPPORTED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
