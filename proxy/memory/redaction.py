"""PII redaction applied before anything is stored or sent to the compression model.

``redact(text, mode)`` finds emails, phone numbers, payment card numbers, bank
account numbers (IBANs) and ID numbers and, by ``mode``:

- ``mask`` (default): keeps the last four digits (characters for IDs and
  IBANs) and a label — ``[card ****8865]``, ``[iban ****3000]``, ``[phone
  ****0199]``, ``[id ****123X]``; an email keeps its first character and its
  domain — ``[email a***@example.com]`` (the domain says "work" or "personal"
  without naming the person);
- ``drop``: leaves only the label — ``[card removed]``, ``[email removed]``;
- ``keep``: returns the text unchanged.

Detection is deliberately narrow so ordinary numbers survive: card numbers
must pass the Luhn check, IBANs their ISO 7064 mod-97 check, Chinese resident IDs their checksum, US phones need
their 3-3-4 shape, international phones a leading ``+``, passports the word
"passport" / "护照" before them. Years, amounts, dates, times, order numbers
and short digit runs are never touched.

Redaction is idempotent: the replacement tokens contain at most four
consecutive digits and no email local part, so no detector matches them again.
Digit boundaries are ASCII-only on purpose: in Chinese text a number sits
directly against CJK characters, which ``\\b`` would treat as word characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..short_texts import kept

MODES = ("mask", "keep", "drop")

# ASCII boundaries: "电话13800138000" must match, "A4111111111111111" must not.
_L = r"(?<![0-9A-Za-z+])"
_R = r"(?![0-9A-Za-z])"

# The lookbehind anchors a match at the start of a run: without it a long token
# with no "@" (a pasted key, a base64 blob) costs quadratic time.
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CN_ID18 = re.compile(
    _L + r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]" + _R
)
_CN_ID15 = re.compile(_L + r"[1-9]\d{5}\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}" + _R)
_SSN = re.compile(r"(?<![0-9A-Za-z-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![0-9A-Za-z-])")
_PASSPORT = re.compile(
    r"(?i:passport(?:\s+(?:number|no\.?|#))?(?:\s+is)?\s*[:#]?\s*|护照(?:号码?)?(?:是|为)?\s*[:：]?\s*)"
    r"(?P<num>[A-Z]{0,2}\d{6,9})" + _R
)
# Cards: one unbroken run, or groups of four (Amex 4-6-5) with one consistent separator,
# so a card followed by a year ("... 8865 2026") is not swallowed into one long run.
_CARD = re.compile(
    _L
    + r"(?:\d{13,19}"
    + r"|\d{4}(?P<s1>[ -])\d{4}(?P=s1)\d{4}(?P=s1)\d{1,4}(?:(?P=s1)\d{3})?"
    + r"|\d{4}(?P<s2>[ -])\d{6}(?P=s2)\d{4,5})"
    + _R
)
# An IBAN: a country code, two check digits and 11-30 letters or digits, written in one run or
# in groups of four (the last shorter) — ISO 13616; lengths run 15 (Norway) to 34 characters.
_IBAN = re.compile(
    r"(?<![0-9A-Za-z])[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,6}(?: [A-Z0-9]{1,4})?)" + _R
)
# North American numbers first, with their exact 3-3-4 shape, so a year written after
# the number ("+1 415 555 0199 2026") is not taken as a fifth group.
_PHONE_INTL = re.compile(
    r"(?<![0-9A-Za-z])(?:\+1[ .-]?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}"
    r"|\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5})" + _R
)
_PHONE_CN = re.compile(_L + r"(?:86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}" + _R)
_PHONE_US = re.compile(
    r"(?<![0-9A-Za-z+(-])(?:1[ .-])?(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![0-9A-Za-z-])"
)

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def redact(text: str, mode: str = "mask") -> str:
    """Return ``text`` with PII replaced according to ``mode`` (``mask``, ``keep``, ``drop``).

    Raises ValueError for an unknown mode; never changes text that holds no PII.
    """
    if mode not in MODES:
        raise ValueError(f"unknown PII mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "keep" or not text or _DIGIT_OR_AT.search(text) is None:
        return text
    return _redacted(text, mode)


# Every detector needs a digit (``\d``, Unicode's too) or an email's "@": text with neither holds no PII.
_DIGIT_OR_AT = re.compile(r"[\d@]")
# A user's turn is masked when its request's trace is kept, again when it is indexed, when it is mined
# and when it is sent to the compression model: the masked form of short texts is kept, for the
# ``KEPT_TEXTS`` most recent (redaction is a function of the text and the mode alone).
KEPT_TEXTS = 2048


@kept(KEPT_TEXTS)
def _redacted(text: str, mode: str) -> str:
    for pattern, render in _DETECTORS[mode]:
        text = pattern.sub(render, text)
    return text


def redact_message(msg: Mapping[str, Any], mode: str = "mask") -> dict[str, Any]:
    """A copy of a chat message with its string content and text parts redacted.

    Other keys and non-text parts (images, audio, tool calls) are copied as they are;
    the input is never mutated.
    """
    out = dict(msg)
    content = msg.get("content")
    if isinstance(content, str):
        out["content"] = redact(content, mode)
    elif isinstance(content, list):
        out["content"] = [_redact_part(part, mode) for part in content]
    return out


def _redact_part(part: Any, mode: str) -> Any:
    if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return {**part, "text": redact(part["text"], mode)}
    return dict(part) if isinstance(part, Mapping) else part


Render = Callable[[re.Match[str]], str]


def _detectors(mode: str) -> list[tuple[re.Pattern[str], Render]]:
    # Order matters: an 18-digit ID can also pass Luhn, a 15-digit card can look
    # like an old ID; the more specific check runs first and its token shields the rest.
    return [
        (_EMAIL, lambda m: _email(m.group(), mode)),
        (_IBAN, lambda m: _label("iban", m.group(), mode) if _iban_ok(m.group()) else m.group()),
        (_CN_ID18, lambda m: _label("id", m.group(), mode) if _cn_id_ok(m.group()) else m.group()),
        (_CARD, lambda m: _label("card", m.group(), mode) if _luhn_ok(m.group()) else m.group()),
        (_CN_ID15, lambda m: _label("id", m.group(), mode)),
        (_SSN, lambda m: _label("id", m.group(), mode)),
        (_PASSPORT, lambda m: _passport(m, mode)),
        (_PHONE_INTL, lambda m: _phone(m.group(), mode, min_digits=8)),
        (_PHONE_CN, lambda m: _label("phone", m.group(), mode)),
        (_PHONE_US, lambda m: _label("phone", m.group(), mode)),
    ]


_DETECTORS = {mode: _detectors(mode) for mode in MODES if mode != "keep"}


def _label(kind: str, raw: str, mode: str) -> str:
    if mode == "drop":
        return f"[{kind} removed]"
    tail = "".join(ch for ch in raw if ch.isalnum())[-4:].upper()
    return f"[{kind} ****{tail}]"


def _email(raw: str, mode: str) -> str:
    if mode == "drop":
        return "[email removed]"
    local, _, domain = raw.partition("@")
    return f"[email {local[0]}***@{domain}]"


def _phone(raw: str, mode: str, *, min_digits: int) -> str:
    # E.164 allows at most 15 digits; fewer than 8 is a code or an extension, not a number.
    digits = sum(ch.isdigit() for ch in raw)
    return _label("phone", raw, mode) if min_digits <= digits <= 15 else raw


def _passport(m: re.Match[str], mode: str) -> str:
    # Only the number is replaced; the word "passport" stays, so the text still reads.
    start, end = m.start("num") - m.start(), m.end("num") - m.start()
    whole = m.group()
    return whole[:start] + _label("id", m.group("num"), mode) + whole[end:]


def _luhn_ok(raw: str) -> bool:
    digits = [int(ch) for ch in raw if ch.isdigit()]
    # A run of one repeated digit passes Luhn (all zeros) but is a placeholder, not a card.
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_ok(raw: str) -> bool:
    """ISO 13616: 15-34 characters whose rearranged digits (letters as 10-35) are 1 modulo 97."""
    compact = raw.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _cn_id_ok(raw: str) -> bool:
    total = sum(int(ch) * w for ch, w in zip(raw[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == raw[17].upper()
