"""Keyword search: an English + Chinese tokenizer and an incremental BM25 index.

The scores are exactly ``rank_bm25.BM25Okapi(corpus).get_scores(query)`` (Okapi,
k1=1.5, b=0.75, epsilon=0.25, IDF floored at epsilon × the average IDF), but
computed from postings so that adding or removing one document is cheap and a
query only touches the documents that contain one of its terms.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

import jieba
import numpy as np

from ...short_texts import kept

# jieba logs "Building prefix dict..." to stderr at DEBUG level on first use.
jieba.setLogLevel(logging.WARNING)

K = TypeVar("K", bound=Hashable)

_ENGLISH_STOP_WORDS = """
    a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did didn't
    do does doesn't doing don't down during each few for from further get got had hadn't
    has hasn't have haven't having he he'd he'll he's her here here's hers herself him
    himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just
    let's me more most mustn't my myself no nor not of off on once only or other ought our
    ours ourselves out over own please same shan't she she'd she'll she's should shouldn't
    so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up
    us very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's will with won't would wouldn't
    yes you you'd you'll you're you've your yours yourself yourselves
"""
ENGLISH_STOP_WORDS = frozenset(_ENGLISH_STOP_WORDS.split())

# Function words that jieba emits as tokens of their own; content characters
# such as 猫 or 花 are kept even when they stand alone.
_CHINESE_STOP_WORDS = """
    的 了 着 过 是 在 有 和 与 及 或 而 且 就 都 也 还 又 再 才 只 很 太 更 最 不 没 别
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个 这些 那些 这里
    那里 这样 那样 哪 哪个 哪些 哪里 什么 怎么 怎样 怎么样 为什么 如何 多少 几 谁 吗 呢
    吧 啊 呀 哦 嗯 哈 啦 嘛 么 把 被 给 让 对 向 从 到 于 以 为 为了 因为 所以 但是 但
    可是 如果 虽然 然后 还是 已经 就是 可以 能 会 要 想 得 地 之 其 此 个 一 一个 一下
    一些 上 下 里 中 请 呗 呐 之后 之前 以及 并且 或者 而且 关于
"""
CHINESE_STOP_WORDS = frozenset(_CHINESE_STOP_WORDS.split())

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# One pass over the text: a run of Han characters (handed to jieba), a decimal
# or dotted number (3.11, 192.168.0.1), or a word with optional apostrophes.
_TOKEN_RE = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"
    r"|(?P<num>\d+(?:\.\d+)+)"
    rf"|(?P<word>[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)*)"
)
# "1,234,567" is one amount, not three numbers.
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_RUN = re.compile(f"[{_CJK}]+")
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PLURAL_EXCEPTIONS = ("ss", "us", "is", "ous")


def warm_up() -> None:
    """Load jieba's dictionary now (about a second) rather than on the first request."""
    jieba.initialize()


def tokenize(text: str) -> list[str]:
    """Search terms of ``text``: lowercased, stop words removed, Chinese segmented.

    Deterministic and order-preserving; the same function must index documents
    and parse queries, or their terms will not meet. A request's question is
    read several times (is it short, its terms, its names' words) and indexed
    after the response: the terms of the ``KEPT_TEXTS`` short texts
    (``short_texts``) read last are kept.
    """
    return list(_terms(text))


KEPT_TEXTS = 4096


@kept(KEPT_TEXTS)
def _terms(text: str) -> tuple[str, ...]:
    text = _THOUSANDS_RE.sub("", unicodedata.normalize("NFKC", text).casefold())
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        if match.lastgroup == "cjk":
            tokens.extend(_chinese_terms(match.group()))
        elif match.lastgroup == "num":
            tokens.append(match.group())
        else:
            term = _english_term(match.group())
            if term:
                tokens.append(term)
    return tuple(tokens)


def dictionary_words(text: str) -> list[str]:
    """The Chinese words of ``text`` as jieba's dictionary alone cuts them, stop words left out: no guessing of
    unknown words, which glues a short run together (把烟戒了 → 烟, 戒; ``tokenize`` finds 烟戒). Two
    statements of one topic share these more surely than their search terms."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return [w for m in _CJK_RUN.finditer(text) for w in jieba.lcut(m.group(), HMM=False) if w not in CHINESE_STOP_WORDS]


def mostly_cjk(text: str) -> bool:
    """Whether CJK characters outnumber the other letters of ``text`` ("Python 里怎么反转列表" is)."""
    cjk = len(_CJK_RE.findall(text))
    return cjk > 0 and cjk > sum(1 for ch in text if ch.isalpha()) - cjk


def _chinese_terms(run: str) -> Iterable[str]:
    # cut_for_search also yields the shorter words inside a compound
    # (过敏症 → 过敏, 过敏症), so a query for 过敏 finds 过敏症 and vice versa.
    return (w for w in jieba.cut_for_search(run) if w not in CHINESE_STOP_WORDS)


def _english_term(word: str) -> str:
    word = word.replace("’", "'")
    if word in ENGLISH_STOP_WORDS:
        return ""
    if word.endswith("'s"):
        word = word[:-2]
    return _singular(word.replace("'", ""))


def _singular(word: str) -> str:
    """Light plural folding (peanuts → peanut, allergies → allergy), letters only.

    Applied to documents and queries alike, so an imperfect stem (news → new)
    still matches itself; it only has to map plural and singular together.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(_PLURAL_EXCEPTIONS):
        return word[:-1]
    return word


class BM25Index(Generic[K]):
    """Okapi BM25 over documents added and removed one at a time.

    ``scores`` equals ``rank_bm25.BM25Okapi(corpus).get_scores(query)`` for the
    current corpus (insertion order does not matter) on every document that
    contains at least one query term, and omits the others (whose Okapi score
    is 0). Not thread-safe: callers serialise access.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._postings: dict[str, dict[int, int]] = {}  # term -> {slot: tf}
        self._slots: dict[K, int] = {}
        # Per slot: its id and its distinct terms (the forward index that makes
        # removal cost the document's length, not the vocabulary's).
        self._ids: list[K] = []
        self._terms: list[tuple[str, ...]] = []
        self._free: list[int] = []
        self._doc_len = np.zeros(0, dtype=np.float64)
        self._total_len = 0
        # How many terms have each document frequency: enough to recompute the
        # average IDF in O(distinct frequencies) instead of O(vocabulary).
        self._df_histogram: Counter[int] = Counter()
        self._avg_idf: float | None = None

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slots

    def add(self, doc_id: K, tokens: Sequence[str]) -> None:
        """Index a document; adding an id again replaces its previous tokens."""
        if doc_id in self._slots:
            self.remove(doc_id)
        counts = Counter(tokens)
        slot = self._take_slot(doc_id, tuple(counts))
        self._doc_len[slot] = len(tokens)
        self._total_len += len(tokens)
        for term, tf in counts.items():
            docs = self._postings.setdefault(term, {})
            self._move_df(len(docs), len(docs) + 1)
            docs[slot] = tf
        self._avg_idf = None

    def remove(self, doc_id: K) -> None:
        """Forget a document; an unknown id is ignored."""
        slot = self._slots.pop(doc_id, None)
        if slot is None:
            return
        for term in self._terms[slot]:
            docs = self._postings[term]
            self._move_df(len(docs), len(docs) - 1)
            del docs[slot]
            if not docs:
                del self._postings[term]
        self._total_len -= int(self._doc_len[slot])
        self._doc_len[slot] = 0
        self._terms[slot] = ()
        self._free.append(slot)
        self._avg_idf = None

    def scores(self, query_tokens: Sequence[str], limit: int | None = None) -> dict[K, float]:
        """BM25 of every document containing a query term (a repeated term counts twice).

        With ``limit``, only the ``limit`` best of them (ties broken arbitrarily),
        which saves building a large dict when a common term matches most documents.
        """
        terms = [t for t in query_tokens if t in self._postings]
        if not terms or (limit is not None and limit <= 0):
            return {}
        avgdl = self._total_len / len(self._slots)
        acc = np.zeros(len(self._ids), dtype=np.float64)
        matched = np.zeros(len(self._ids), dtype=np.bool_)
        # A repeated term (recall asks each word twice) adds the same array again, computed once: the
        # same additions in the same order, so the same sums to the bit.
        computed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term in terms:
            known = computed.get(term)
            if known is None:
                docs = self._postings[term]
                slots = np.fromiter(docs.keys(), dtype=np.int64, count=len(docs))
                tf = np.fromiter(docs.values(), dtype=np.float64, count=len(docs))
                dl = self._doc_len[slots]
                # Same expression, same order of operations as rank_bm25's get_scores.
                known = computed[term] = (slots, self.idf(term) * (
                    tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / avgdl))
                ))
                matched[slots] = True
            slots, term_scores = known
            acc[slots] += term_scores
        hit = np.flatnonzero(matched)
        if limit is not None and limit < len(hit):
            hit = hit[np.argpartition(-acc[hit], limit - 1)[:limit]]
        ids = self._ids
        return {ids[s]: v for s, v in zip(hit.tolist(), acc[hit].tolist(), strict=True)}

    def idf(self, term: str) -> float:
        """rank_bm25's IDF: log((N - n + 0.5) / (n + 0.5)), negatives floored at ε × mean IDF."""
        df = len(self._postings.get(term, ()))
        if df == 0:
            return 0.0
        value = _raw_idf(len(self._slots), df)
        return value if value >= 0 else self.epsilon * self._average_idf()

    def _average_idf(self) -> float:
        if self._avg_idf is None:
            n = len(self._slots)
            total = sum(count * _raw_idf(n, df) for df, count in self._df_histogram.items())
            self._avg_idf = total / len(self._postings)
        return self._avg_idf

    def _move_df(self, old: int, new: int) -> None:
        if old:
            self._df_histogram[old] -= 1
            if not self._df_histogram[old]:
                del self._df_histogram[old]
        if new:
            self._df_histogram[new] += 1

    def _take_slot(self, doc_id: K, terms: tuple[str, ...]) -> int:
        if self._free:
            slot = self._free.pop()
            self._ids[slot], self._terms[slot] = doc_id, terms
        else:
            slot = len(self._ids)
            self._ids.append(doc_id)
            self._terms.append(terms)
            if slot >= len(self._doc_len):
                grown = np.zeros(max(64, 2 * len(self._doc_len)), dtype=np.float64)
                grown[: len(self._doc_len)] = self._doc_len
                self._doc_len = grown
        self._slots[doc_id] = slot
        return slot


def _raw_idf(n_docs: int, df: int) -> float:
    return math.log(n_docs - df + 0.5) - math.log(df + 0.5)
