"""Decoding a body's ``Content-Encoding`` within a bound: one rule for requests, replies and recording.

A body is never trusted to stay small once decoded: 1 MB of gzip inflates to
1 GB. ``decode`` makes at most ``limit + 1`` bytes of any body, and says so
(``BodyTooLarge``) rather than make more.
"""

from __future__ import annotations

import zlib

from .errors import BodyTooLarge, UndecodableBody

READABLE = ("gzip", "x-gzip", "deflate")


def decode(body: bytes, encoding: str | None, limit: int) -> bytes:
    """``body`` decoded from ``encoding`` (none, identity, gzip, x-gzip, deflate), at most ``limit`` bytes.

    Raises ``BodyTooLarge`` past ``limit`` (an unencoded body too), ``UndecodableBody``
    for an encoding it does not read (br...) or bytes that are not what they say.
    A ``deflate`` body may be zlib-wrapped, as the RFC has it, or raw, as some senders do.
    """
    kind = (encoding or "identity").strip().lower()
    if kind == "identity":
        if len(body) > limit:
            raise BodyTooLarge(f"the body exceeds {limit} bytes")
        return body
    if kind not in READABLE:
        raise UndecodableBody(f"unsupported Content-Encoding {encoding!r} (gzip and deflate are read)")
    tries = [zlib.MAX_WBITS, -zlib.MAX_WBITS] if kind == "deflate" else [16 + zlib.MAX_WBITS]
    for wbits in tries:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise BodyTooLarge(f"the body decodes to more than {limit} bytes")
        return out
    raise UndecodableBody(f"the body is not valid {kind}")
