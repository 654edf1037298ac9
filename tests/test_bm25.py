"""The tokenizer (English and Chinese) and the incremental BM25 index."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from proxy.memory.search.bm25 import BM25Index, dictionary_words, tokenize, warm_up


def test_english_lowercased_without_stop_words() -> None:
    assert tokenize("I am allergic to Peanuts.") == ["allergic", "peanut"]
    assert tokenize("What food allergy do I have?") == ["food", "allergy"]


def test_english_possessives_contractions_and_plurals() -> None:
    assert tokenize("John's cats' toys") == ["john", "cat", "toy"]
    assert tokenize("I’m sure it's fine, don't worry") == ["sure", "fine", "worry"]
    assert tokenize("allergies classes buses status") == ["allergy", "class", "buse", "status"]


def test_plural_folding_lets_singular_queries_match() -> None:
    index: BM25Index[str] = BM25Index()
    index.add("a", tokenize("My allergies: peanuts and cashews"))
    index.add("b", tokenize("The weather is nice today"))
    index.add("c", tokenize("Meeting moved to Friday"))
    assert list(index.scores(tokenize("peanut allergy"))) == ["a"]


def test_numbers_ids_and_amounts_are_kept() -> None:
    tokens = tokenize("Order #A1234-XZ cost $1,234.56 in 2024 on Python 3.11")
    assert tokens == ["order", "a1234", "xz", "cost", "1234.56", "2024", "python", "3.11"]


def test_full_width_forms_are_folded() -> None:
    assert tokenize("Ｆｕｌｌ　ｗｉｄｔｈ １２３") == ["full", "width", "123"]


def test_chinese_is_segmented_and_stop_words_dropped() -> None:
    assert tokenize("我对花生过敏") == ["花生", "过敏"]
    assert tokenize("我对什么过敏？") == ["过敏"]


def test_chinese_compounds_also_yield_their_parts() -> None:
    # cut_for_search: a query for 过敏 finds a text that says 过敏症.
    assert "过敏" in tokenize("我有花生过敏症")


def test_dictionary_words_cut_chinese_by_the_dictionary_alone() -> None:
    assert "烟戒" in tokenize("我三个月前把烟戒了。")  # an unknown run guessed as one word
    assert {"烟", "戒"} <= set(dictionary_words("我三个月前把烟戒了。"))
    assert "我" not in dictionary_words("我三个月前把烟戒了。")  # a stop word
    assert dictionary_words("I quit smoking 3 months ago.") == []


def test_mixed_chinese_english_and_digits() -> None:
    assert tokenize("我2024年去过北京，订单号是 AB-9981。")[:4] == ["2024", "年", "去过", "北京"]
    assert {"订单号", "ab", "9981"} <= set(tokenize("订单号是 AB-9981"))


def test_chinese_query_matches_chinese_text() -> None:
    index: BM25Index[int] = BM25Index()
    for i, text in enumerate(["我对花生过敏", "今天天气很好", "我的航班是周五", "明天开会"]):
        index.add(i, tokenize(text))
    scores = index.scores(tokenize("我对什么过敏？"))
    assert list(scores) == [0]
    assert scores[0] > 0


def test_empty_and_punctuation_only_text() -> None:
    assert tokenize("") == []
    assert tokenize("  ... ？！ ") == []


def test_loading_jieba_prints_nothing() -> None:
    code = "from proxy.memory.search import bm25; bm25.warm_up(); bm25.tokenize('我对花生过敏')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (done.stdout, done.stderr) == ("", "")


def test_warm_up_is_idempotent() -> None:
    warm_up()
    warm_up()
    assert tokenize("花生") == ["花生"]


def _random_corpus(rng: random.Random) -> list[list[str]]:
    vocab = [f"w{i}" for i in range(rng.randint(2, 40))]
    size = rng.randint(1, 40)
    corpus = [[rng.choice(vocab) for _ in range(rng.randint(0, 15))] for _ in range(size)]
    corpus[0].append(vocab[0])  # rank_bm25 divides by the vocabulary size
    return corpus


def _assert_matches_okapi(index: BM25Index[int], corpus: list[list[str]], query: list[str]) -> None:
    expected = BM25Okapi(corpus).get_scores(query)
    got = index.scores(query)
    for i, doc in enumerate(corpus):
        if set(query) & set(doc):
            assert got[i] == pytest.approx(expected[i], abs=1e-9, rel=0)
        else:
            assert i not in got
            assert expected[i] == 0


@pytest.mark.parametrize("seed", range(40))
def test_scores_equal_rank_bm25_okapi(seed: int) -> None:
    rng = random.Random(seed)
    corpus = _random_corpus(rng)
    index: BM25Index[int] = BM25Index()
    order = list(range(len(corpus)))
    rng.shuffle(order)  # insertion order must not matter
    for i in order:
        index.add(i, corpus[i])
    vocab = [*sorted({t for doc in corpus for t in doc}), "absent"]
    for _ in range(5):
        query = [rng.choice(vocab) for _ in range(rng.randint(1, 10))]  # repeats included
        _assert_matches_okapi(index, corpus, query)


def _scores_term_by_term(index: BM25Index[int], query: list[str]) -> dict[int, float]:
    """``scores`` as it was: every occurrence of a term computed again (the sums it must equal to the bit)."""
    terms = [t for t in query if t in index._postings]
    avgdl = index._total_len / len(index._slots)
    acc = np.zeros(len(index._ids), dtype=np.float64)
    matched = np.zeros(len(index._ids), dtype=np.bool_)
    for term in terms:
        docs = index._postings[term]
        slots = np.fromiter(docs.keys(), dtype=np.int64, count=len(docs))
        tf = np.fromiter(docs.values(), dtype=np.float64, count=len(docs))
        dl = index._doc_len[slots]
        acc[slots] += index.idf(term) * (tf * (index.k1 + 1) / (tf + index.k1 * (1 - index.b + index.b * dl / avgdl)))
        matched[slots] = True
    hit = np.flatnonzero(matched)
    return {index._ids[s]: v for s, v in zip(hit.tolist(), acc[hit].tolist(), strict=True)}


@pytest.mark.parametrize("seed", range(30))
def test_a_repeated_query_term_sums_to_the_bit_as_when_computed_each_time(seed: int) -> None:
    rng = random.Random(2000 + seed)
    corpus = _random_corpus(rng)
    index: BM25Index[int] = BM25Index()
    for i, doc in enumerate(corpus):
        index.add(i, doc)
    vocab = sorted({t for doc in corpus for t in doc})
    for _ in range(5):
        asked = [rng.choice(vocab) for _ in range(rng.randint(1, 6))]
        query = [*asked, *dict.fromkeys(asked), *rng.sample(vocab, min(3, len(vocab))), "absent"]  # as recall asks
        assert index.scores(query) == _scores_term_by_term(index, query)


@pytest.mark.parametrize("seed", range(20))
def test_scores_stay_equal_after_removals_and_replacements(seed: int) -> None:
    rng = random.Random(1000 + seed)
    corpus = _random_corpus(rng)
    index: BM25Index[int] = BM25Index()
    vocab = sorted({t for doc in corpus for t in doc})
    for i, doc in enumerate(corpus):
        index.add(i, [rng.choice(vocab) for _ in range(4)])  # replaced below
        index.add(10_000 + i, [rng.choice(vocab)])  # removed below
        index.add(i, doc)
    for i in range(len(corpus)):
        index.remove(10_000 + i)
    assert len(index) == len(corpus)
    query = [rng.choice(vocab) for _ in range(6)]
    _assert_matches_okapi(index, corpus, query)


def test_tiny_corpus_has_rank_bm25_negative_scores() -> None:
    # With one document every term is in "more than half" of the corpus, so
    # rank_bm25's epsilon floor (of a negative average) makes scores negative.
    index: BM25Index[str] = BM25Index()
    index.add("only", ["peanut", "allergy"])
    expected = BM25Okapi([["peanut", "allergy"]]).get_scores(["peanut"])[0]
    assert index.scores(["peanut"]) == {"only": pytest.approx(expected, abs=1e-9)}
    assert expected < 0


def test_only_documents_with_a_query_term_are_returned() -> None:
    index: BM25Index[str] = BM25Index()
    index.add("a", ["peanut", "allergy"])
    index.add("b", ["weather", "nice"])
    index.add("c", ["flight", "friday"])
    assert set(index.scores(["peanut", "friday", "unknown"])) == {"a", "c"}
    assert index.scores(["unknown"]) == {}
    assert index.scores([]) == {}


def test_limit_keeps_the_best() -> None:
    index: BM25Index[int] = BM25Index()
    for i in range(50):
        index.add(i, ["x"] * (i % 5 + 1) + ["pad"] * 5 + [f"u{i}"])
    full = index.scores(["x"])
    top = index.scores(["x"], limit=3)
    assert len(top) == 3
    assert min(top.values()) >= sorted(full.values())[-3]
    assert index.scores(["x"], limit=0) == {}


def test_remove_unknown_is_ignored_and_empty_index_scores_nothing() -> None:
    index: BM25Index[str] = BM25Index()
    index.remove("nope")
    assert index.scores(["x"]) == {}
    index.add("a", ["x"])
    index.remove("a")
    assert len(index) == 0
    assert "a" not in index
    assert index.scores(["x"]) == {}


def test_removed_slots_are_reused_without_leaking_old_terms() -> None:
    index: BM25Index[str] = BM25Index()
    index.add("a", ["old"])
    index.add("b", ["keep"])
    index.remove("a")
    index.add("c", ["new"])
    assert index.scores(["old"]) == {}
    assert set(index.scores(["new", "keep"])) == {"b", "c"}


def test_terms_read_again_are_the_same_and_the_callers_own() -> None:
    short = "I'm allergic to peanuts, 我对花生过敏"
    long = "camping trips " * 100 + short  # past what is kept: read every time
    for text in (short, long):
        first = tokenize(text)
        first.append("changed by its caller")
        again = tokenize(text)
        assert again == first[:-1] and again is not first
        assert again[-4:] == ["allergic", "peanut", "花生", "过敏"]
