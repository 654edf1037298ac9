"""Which unknown keys are never forwarded upstream in passthrough mode.

With ``passthrough_keys: true`` a key that matches no tenant is taken for the
client's own provider key and sent upstream. Keys Paperclip knows, or nearly
knows, are refused (401) instead, because sending them would leak a secret of
this proxy to the provider:

- any tenant's admin key (it is never a client key either);
- a near miss of a configured plain key (client or admin): an edit distance
  of at most ``NEAR_EDITS``, or the same length give or take ``NEAR_EDITS``
  and the same first ``max(8, len // 2)`` characters — a typo, a truncated
  copy, a key with a character too many.

Keys configured as ``sha256:<hex>`` can only be recognised exactly: store
plain keys (from ``${ENV}``) to have their near misses refused too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

NEAR_EDITS = 3
_VERDICTS = 4096


def edit_distance(a: str, b: str, bound: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``bound + 1`` once it is known to exceed ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > bound:
            return bound + 1
        previous = current
    return min(previous[-1], bound + 1)


def is_near(presented: str, known: str) -> bool:
    if abs(len(presented) - len(known)) > NEAR_EDITS:
        return False
    head = max(8, len(known) // 2)
    if len(known) >= head and presented[:head] == known[:head]:
        return True
    return edit_distance(presented, known, NEAR_EDITS) <= NEAR_EDITS


class NearMisses:
    """Remembers its verdicts: passthrough clients send the same key on every request."""

    def __init__(self, plain_keys: Iterable[str]) -> None:
        self._known = [k for k in plain_keys if not k.startswith("sha256:")]
        self._verdicts: OrderedDict[str, bool] = OrderedDict()

    def __call__(self, presented: str) -> bool:
        verdict = self._verdicts.get(presented)
        if verdict is None:
            verdict = any(is_near(presented, k) for k in self._known)
            self._verdicts[presented] = verdict
            if len(self._verdicts) > _VERDICTS:
                self._verdicts.popitem(last=False)
        return verdict
