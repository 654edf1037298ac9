"""A user's statements of themself in Chinese, kept as guesses where the rules stand in
(``memory/extraction/chinese_statements.py``).

The reading is pure; then through the proxy on real sockets, with a compression
model whose replies are never JSON (the fake upstream's): a lasting fact said
in Chinese in words no rule reads reaches a fresh chat, and a moment does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.extraction import chinese_statements
from proxy.memory.memory_schema import is_guess
from tests.admin_helpers import admin, ask, teach
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream


@pytest.mark.parametrize("said", [
    "我老家在云南大理，现在也住那边。",
    "我从小就对猫毛敏感，一靠近就打喷嚏。",
    "我们一家人都不吃牛肉。",
    "我每周三晚上都去游泳。",
    "我在一家医院做药剂师。",
    "我不想吃太油的东西，胃不好。",
])
def test_a_users_lasting_statement_of_themself_is_read(said: str) -> None:
    assert chinese_statements.statement(said)


@pytest.mark.parametrize("said", [
    "我今天有点头晕。",  # for now
    "我昨天去看了一场电影。",  # one moment past
    "我下周要去上海开会。",  # one to come
    "我想学弹吉他。",  # a wish
    "我觉得这个方案更好。",  # an opinion
    "你能帮我查一下航班吗？",  # a request
    "我应该带几件外套？",  # a question
    "提醒我周五交房租。",  # a reminder asked for
    "我妈妈对花粉过敏。",  # someone else's fact
    "我们公司搬到了十楼。",  # a workplace's
    "如果我住在海边就好了。",  # supposed
    "谢谢，我明白了。",  # a reply
    "好的。",  # too short, no speaker
    "I live in Leeds.",  # English: the reader by meaning's
])
def test_what_is_not_the_users_lasting_statement_is_not_read(said: str) -> None:
    assert not chinese_statements.statement(said)


def test_every_reading_is_a_standing_guess_about_the_user_under_a_key_of_many_values() -> None:
    items = chinese_statements.read([(0, "我们一家人都不吃牛肉。"), (2, "我每天早上练半小时瑜伽。"),
                                     (4, "我们一家人都不吃牛肉。"), (6, "我今天有点头晕。")])
    assert [(i.content, i.turns) for i in items] == [("我们一家人都不吃牛肉。", (0,)), ("我每天早上练半小时瑜伽。", (2,))]
    assert all(i.standing and is_guess(i.confidence) and i.about_user and i.key == chinese_statements.KEY
               for i in items)


@pytest.mark.parametrize(("said", "key"), [
    ("我在一家医院做药剂师。", "user.said.job"), ("我已经离职了，现在在一家咖啡店当店长。", "user.said.job"),
    ("我转行做了程序员。", "user.said.job"), ("我们上个月搬去了杭州。", "user.said.home"),
    ("现在我定居在青岛了。", "user.said.home"), ("我家在天津。", "user.said.home"),
    ("我每天坐地铁上班。", chinese_statements.KEY),  # a commute, not a job
    ("我是这家健身房的会员。", chinese_statements.KEY),  # a member, not a job
    ("我辞职后搬到了大理。", chinese_statements.KEY),  # a job and a home: which is not told
])
def test_a_home_or_a_job_is_filed_under_its_slots_loose_key(said: str, key: str) -> None:
    (item,) = chinese_statements.read([(0, said)])
    assert item.key == key and item.standing and is_guess(item.confidence)
    assert item.category == ("other" if key == chinese_statements.KEY else "identity")


# Chinese drops the subject a listener knows: a sentence that opens on how often or how long something is so
# ("每天", "平时", "从小") and names no one is the speaker's habit or lasting state.
@pytest.mark.parametrize("said", [
    "每天早上都要跑五公里。",
    "平时不太吃辣，胃受不了。",
    "从小就对青霉素过敏。",
    "周末一般都在家带孩子做饭。",
    "经常加班到晚上十点以后。",
    "从来不喝含酒精的饮料。",
    "每个月房租占了工资的一半。",
    "工作日都是坐地铁上下班。",
    "家里养了两只猫，出门得有人喂。",  # the speaker's household, as 我家
    "家里有两个上小学的孩子。",
])
def test_a_lasting_statement_without_its_subject_is_read_as_the_speakers(said: str) -> None:
    assert chinese_statements.statement(said)


# So is a home or a job told without its subject ("在腾讯上班", "入职字节第二周", "转行做UI设计"): where and as what
# one lives and works is said of oneself.
@pytest.mark.parametrize(("said", "key"), [
    ("在腾讯上班，这个季度加班多到爆，每天十一点才走。", "user.said.job"),
    ("入职字节第二周，新同事都挺好的。", "user.said.job"),
    ("辞职三个月了，转行做UI设计。", "user.said.job"),
    ("上个月搬到杭州了，还在适应。", "user.said.home"),
])
def test_a_home_or_a_job_without_its_subject_is_the_speakers(said: str, key: str) -> None:
    (item,) = chinese_statements.read([(0, said)])
    assert item.key == key and is_guess(item.confidence)


@pytest.mark.parametrize("said", [
    "在大厂上班压力很大吧？",  # a question
    "他在腾讯上班，挺忙的。",  # someone else
    "在外企工作的人英语都好。",  # people at large
    "入职体检一般查什么？",  # a question
    "在医院工作的护士都很辛苦。",  # 的: what describes someone, not the speaker's own job
    "搬到郊区的朋友都说空气好。",
])
def test_a_home_or_a_job_said_of_no_one_or_asked_is_not_read(said: str) -> None:
    assert not chinese_statements.statement(said)


@pytest.mark.parametrize("said", [
    "每天都在下雨，烦死了。",  # the weather
    "经常有人问这个问题。",  # someone else
    "平时这条街人很多。",  # a place
    "每次都这样，真没办法。",  # a complaint of the moment
    "总是连不上网，怎么回事？",  # a question
    "一直没收到快递。",  # what has not happened yet: no habit
    "每天他都送孩子上学。",  # someone else's habit
    "平时你都几点睡？",  # a question to the assistant
    "每天喝多少水比较好？",  # a question
    "经常听说这家店不错。",  # hearsay about a shop
    "他家里养了两只猫。",  # someone else's household
    "家里的网络总是断，你能帮我看看吗？",  # a request to the assistant
])
def test_a_subjectless_sentence_that_is_no_habit_of_the_speakers_is_not_read(said: str) -> None:
    assert not chinese_statements.statement(said)


@given(st.text(alphabet="abcdefghij klmnopqrstuvwxyz,.!?'", max_size=80))
def test_text_without_chinese_is_never_read(text: str) -> None:
    assert not chinese_statements.statement(text)
    assert chinese_statements.read([(0, text)]) == []


def test_through_the_proxy_a_chinese_fact_no_rule_reads_reaches_a_fresh_chat_and_a_moment_does_not(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Real sockets, the hashing embedder (no reader by meaning), a compression model that never answers JSON."""
    proxy = make_proxy()
    lasting, moment = "我老家在云南大理，现在也住那边。", "我今天有点头晕。"
    teach(proxy, "mei", lasting)
    teach(proxy, "mei", moment)
    ask(proxy, "mei", "周末去哪儿玩比较好？")
    forwarded = upstream.chat_requests()[-1].body.decode("utf-8")
    with admin(proxy) as http:
        profile = json.dumps(http.get("/paperclip/v1/users/mei/profile").json(), ensure_ascii=False)
    assert lasting in json.loads(forwarded)["messages"][-1]["content"] and lasting in profile
    assert moment not in profile
