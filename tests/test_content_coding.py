"""``content_coding.decode``: a body's Content-Encoding decoded within a bound, for requests, replies and recording."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.content_coding import decode
from proxy.errors import BodyTooLarge, UndecodableBody


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


ENCODERS = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress, "identity": bytes}


@given(st.binary(max_size=5000), st.sampled_from(sorted(ENCODERS)))
def test_a_body_within_its_bound_decodes_to_itself(data: bytes, encoding: str) -> None:
    assert decode(ENCODERS[encoding](data), encoding, len(data)) == data
    assert decode(raw_deflate(data), "deflate", len(data)) == data  # as some senders do deflate


@given(st.binary(min_size=1, max_size=5000), st.sampled_from(sorted(ENCODERS)))
def test_one_byte_past_the_bound_is_too_large(data: bytes, encoding: str) -> None:
    with pytest.raises(BodyTooLarge):
        decode(ENCODERS[encoding](data), encoding, len(data) - 1)


def test_a_bomb_makes_no_more_than_its_bound() -> None:
    bomb = gzip.compress(b"\0" * 200_000_000, compresslevel=9)  # 200 MB in ~200 KB
    with pytest.raises(BodyTooLarge):
        decode(bomb, "gzip", 1024 * 1024)


@pytest.mark.parametrize(("body", "encoding"), [(b"not gzip", "gzip"), (b"not deflate", "deflate"),
                                                (gzip.compress(b"x"), "br"), (b"x", "compress")])
def test_junk_and_unread_encodings_are_undecodable(body: bytes, encoding: str) -> None:
    with pytest.raises(UndecodableBody) as caught:
        decode(body, encoding, 100)
    assert not isinstance(caught.value, BodyTooLarge)


def test_no_encoding_and_identity_are_the_body() -> None:
    assert decode(b"plain", None, 5) == decode(b"plain", " Identity ", 5) == b"plain"
