"""What a user says of themself in Chinese, kept whole as a guess when no model extracts.

The reader by meaning (``meaning.py``) places an English sentence by its
nearness to labelled examples; the bundled model does not read Chinese, so
a Chinese sentence no rule read ("我们家在成都的高新区", "每天早上一片氨氯地平")
was lost when the model was off or its reply unusable. This reader keeps such
a sentence whole, in the user's words, as a standing guess about the user
(``memory_schema.is_guess``: the profile gives guesses only the room that
facts read by their words leave), when it reads as a statement of the
user's own lasting state:

- a first person speaks in it ("我", "我们", "我家", "咱", or "家里" opening it:
  the speaker's household), and not only as the owner of someone else ("我儿子",
  "我们公司": ``_SOMEONE_ELSE``);
- it is short (``MIN_HAN`` to ``MAX_HAN`` Chinese characters) and states:
  not a question, not a request or a word to the assistant ("你", "请",
  "帮我"), not an opinion or a reply ("我觉得", "我明白"), not a wish or a plan
  ("我想", "打算"; "不想" states a preference and stays), nor a reminder asked
  for ("提醒我");
- it stands: not said of a time that ends soon ("今天", "这几天": ``for_now``)
  nor of one moment past or to come ("昨天", "刚才", "下周"), unless it says how things always are
  ("每天", "平时", "一直"); not supposed ("如果……就好了": ``supposed``).

Chinese drops a subject the listener knows, so a sentence that names no
one is also read, when it opens on how often or how long something is so
("每天早上都要跑五公里", "从小就对青霉素过敏", "周末一般都在家": ``_HABIT_OPENING``),
or tells a home or a job (``_HOME``, ``_JOB`` below: "在腾讯上班", "入职字节第二周"):
that is the speaker's habit or lasting state. It must name no one else
(``rule_patterns.speaker_unsaid``: "他", "有人", "大家"), no place or thing as its topic ("这条街",
"这家店": ``_TOPIC``), no weather, no hearsay, and point back to nothing
("每次都这样"); and it must pass the tests above but the first.

Which slot it fills is mostly not read (that needs the model), so it is
filed under a key of many values (``KEY``, category ``other``): one guess
never replaces another, and any value a rule or the model reads stands
beside it. Two slots are read by their words, since a change of them is
said in words no earlier statement shares ("我住在成都", then "我们上个月搬去了
杭州"): a home (``_HOME``: 住在, 搬到, 定居, 买了房…) and a job (``_JOB``: working
at a place, 辞职, 离职, 转行, 入职, being a …师 or …员). A statement of
one of them, and not of both, is filed as the reader by meaning files such a
value (``meaning.py``): category ``identity``, under the slot's loose key
(``lifecycle.LOOSELY_READ``: ``user.said.home``), where it replaces only the
last one read so, and a value a rule or the model reads replaces it; a
change of it marks the earlier value of the slot (``recall/changed_since``).
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..lifecycle import LOOSELY_READ
from ..memory_schema import TYPE_OF_CATEGORY, USER, Category, MemoryItem
from .asking import ZH_ASKED
from .rule_patterns import HAN, chinese, for_now, speaker_unsaid, supposed
from .rules import Said

KEY = "user.statements"
IMPORTANCE = 0.5  # as the reader by meaning: below a rule's reading
CONFIDENCE = 0.5  # a guess
MIN_HAN = 5
MAX_HAN = 40

# A first person, or the speaker's home opening the sentence ("家里养了两只猫": the speaker's household, as 我家).
_SPEAKER = re.compile(r"我|咱|^家里")
# Someone else a first person only owns: kin, partners, friends, the people of one's work or home, and
# bodies of people (a workplace, a school, a team).
SOMEONE_ELSE = (
    r"儿子|女儿|孩子|小孩|宝宝|老公|老婆|丈夫|妻子|爱人|对象|男朋友|女朋友|男友|女友"
    r"|妈妈|妈|爸爸|爸|父亲|母亲|父母|爹|娘|哥哥|哥|姐姐|姐|弟弟|弟|妹妹|妹|爷爷|奶奶|外公|外婆|姥姥|姥爷|公公|婆婆"
    r"|岳父|岳母|亲戚|朋友|闺蜜|同事|同学|室友|邻居|老板|领导|上司|经理|老师|医生|客户"
    r"|公司|单位|办公室|团队|部门|学校|班|楼"
)
_SOMEONE_ELSE = re.compile(rf"(?:我们|我|咱们|咱)(?:的)?(?:家)?(?:{SOMEONE_ELSE})")
_TO_THE_ASSISTANT = re.compile(r"你|您|请|帮我|给我|推荐|告诉我|提醒|麻烦|谢谢|多谢|感谢")
_NO_STATEMENT = re.compile(r"我(?:觉得|认为|感觉|明白|知道了|懂了|同意|看看|试试|问一下|问问|记得你)")
_WISHED = re.compile(r"(?<!不)(?:想|希望|打算|准备|计划|要去)")
# One moment, past or to come.
_ONE_MOMENT = re.compile(r"昨天|昨晚|前天|刚才|刚刚|上周|上个星期|那天|这会儿|此刻|正在|明天|后天|下周|下个星期|下个月")
_ALWAYS = re.compile(r"每天|每周|每次|每个|平时|一直|从小|总是|经常|向来|从来|一向|长期|常年|多年|都是")
# A sentence with no first person is the speaker's when it opens on a habit: how often or how long ("每天",
# "从小", "从来"), or a part of the day or week and how it usually goes ("周末一般", "工作日都是"). Not "每次"
# (each time: said of what just went wrong as often as of a habit) nor "一直" (all along: "一直没收到").
_HABIT_OPENING = re.compile(
    r"^(?:每天|每晚|每周|每个?星期|每个?月|每年|每个?周末|平时|平常|平日|通常|从小|总是|经常|常常|向来|从来|一向"
    r"|常年|多年来|这些年来?"
    r"|(?:早上|早晨|上午|中午|下午|晚上|夜里|白天|周末|工作日|上班|下班后?)(?:一般|通常|都|总是|经常|常常))"
)
# What shows that a sentence that names no one (``speaker_unsaid``) is not about its speaker: a place or
# thing as its topic ("这条街", "那家店"), the weather, what was heard, a pointer back ("都这样").
_TOPIC = re.compile(r"[这那](?:里|儿|边|个(?!季度|月|星期|礼拜|学期)|些|条|家|种|位|件|次|样)")  # not 这个月: a time
_NOT_ITS_SPEAKERS = re.compile(r"下雨|下雪|刮风|天气|气温|雾霾|听说|据说|听人说")


# The words of a home or a job: where the user lives or moved to, or where and as what they work, or that they
# left or changed work. Not 上班 alone ("坐地铁上班" is a commute), nor 老家 (where one is from), nor a member
# (会员, 成员).
_HOME = re.compile(r"住在|住到|搬到|搬去|搬来|搬回|搬家|定居|安家|落户|买了?房|我家在|我们家在|调到")
_JOB = re.compile(r"在[^，。！？,.!?]{1,12}(?:上班|工作)|辞职|离职|跳槽|入职|转行|退休了|失业"
                  r"|(?:是|当|做)了?(?:一名|一个|个)?[^，。！？,.!?]{0,6}(?:师|(?<![会成])员|经理|店长|老板)")
# A slot read so is a loose reading, filed as the reader by meaning files one.
_SLOTS = ((_HOME, "user.location.home"), (_JOB, "user.occupation"))


# A home or a job that describes what follows it ("在医院工作的护士", "搬到郊区的朋友"): someone, not the speaker;
# not "的时候" (when), "的第一年" (the first year since).
_DESCRIBES = re.compile(r"[^，。！？,.!?；;]{0,8}?的(?!时候|话|第|那)")


def _own_home_or_job(text: str) -> bool:
    """Whether ``text`` (naming no one) tells a home or a job of its speaker's, not one that describes someone."""
    return any(not _DESCRIBES.match(text, m.end()) for words in (_HOME, _JOB) for m in words.finditer(text))


def statement(sentence: str) -> bool:
    """Whether ``sentence``, in Chinese, states a lasting fact of its speaker's (the module's rules)."""
    text = sentence.strip()
    if not chinese(text) or not MIN_HAN <= len(HAN.findall(text)) <= MAX_HAN:
        return False
    speaks = [m.start() for m in _SPEAKER.finditer(text)]
    if not speaks:
        if not speaker_unsaid(text) or not (_HABIT_OPENING.match(text) or _own_home_or_job(text)):
            return False
        if _TOPIC.search(text) or _NOT_ITS_SPEAKERS.search(text):
            return False
    else:
        owned = {m.start() for m in _SOMEONE_ELSE.finditer(text)}
        if all(at in owned for at in speaks):  # a first person that only owns someone else
            return False
    if ZH_ASKED.search(text) or _TO_THE_ASSISTANT.search(text) or _NO_STATEMENT.search(text) or _WISHED.search(text):
        return False
    if supposed(text, 0):
        return False
    always = _ALWAYS.search(text) is not None
    return always or not (for_now(text) or _ONE_MOMENT.search(text))


def read(unread: Sequence[Said]) -> list[MemoryItem]:
    """The guesses ``unread``'s Chinese statements make, in order, one per sentence said once."""
    items: list[MemoryItem] = []
    seen: set[str] = set()
    for index, sentence in unread:
        text = sentence.strip()
        if text in seen or not statement(text):
            continue
        seen.add(text)
        slots = [LOOSELY_READ[own] for words, own in _SLOTS if words.search(text)]
        category: Category = "identity" if len(slots) == 1 else "other"
        key = slots[0] if len(slots) == 1 else KEY
        items.append(MemoryItem(
            type=TYPE_OF_CATEGORY[category], category=category, standing=True, content=text, key=key, about=USER,
            importance=IMPORTANCE, confidence=CONFIDENCE, source="user-stated", turns=(index,),
        ))
    return items
