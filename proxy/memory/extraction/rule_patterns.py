"""The rule-based extractor's patterns: each statement a user makes about themselves, and the fact it gives.

English and Chinese: names, allergies, likes and dislikes, deadlines, card
and order numbers, reminders (where the user lives and is for now are
``life_patterns``'). ``RULES`` pairs each pattern with the
function that turns a match into facts (``RuleHit``); keys follow the
convention in ``item_parser``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from ..memory_schema import USER, Category, MemoryType
from .activities import CANON as _ACTIVITY_CANON


class RuleHit(NamedTuple):
    """One fact a rule read, in the memory schema's terms (``memory_schema``)."""

    type: MemoryType
    category: Category
    key: str
    content: str
    importance: float
    about: str = USER  # who it is about: the user, or someone in their care as the user named them
    standing: bool | None = None  # None: the category's default (``memory_schema.STANDS_BY_DEFAULT``)


Rule = Callable[[re.Match[str], str, datetime], list[RuleHit]]

_GLOSSARY = {
    "spicy_food": "spicy|spicy food|spicy foods|spicy dishes|hot food|辣|辣的|辣椒|辣味|辣菜|川菜",
    "peanut": "peanut|peanuts|花生", "seafood": "seafood|海鲜", "shellfish": "shellfish|贝类",
    "milk": "milk|牛奶", "dairy": "dairy|乳制品", "gluten": "gluten|麸质", "egg": "egg|eggs|鸡蛋",
    "coffee": "coffee|咖啡", "cilantro": "cilantro|coriander|香菜", "meat": "meat|肉",
    "beef": "beef|牛肉", "pork": "pork|猪肉", "alcohol": "alcohol|酒", "pollen": "pollen|花粉",
    "penicillin": "penicillin|青霉素", "cat": "cat|猫", "dog": "dog|狗", "son": "son|儿子",
    "daughter": "daughter|女儿", "child": "child|kid|孩子", "wife": "wife|妻子|老婆",
    "husband": "husband|丈夫|老公", "mother": "mother|mom|妈妈|母亲", "father": "father|dad|爸爸|父亲",
    "baby": "baby|宝宝", "friend": "friend|朋友",
}
_CANON = {**_ACTIVITY_CANON, **{alias: canon for canon, aliases in _GLOSSARY.items() for alias in aliases.split("|")}}
# When it happened, said after the object ("coffee two weeks ago", "smoking in March"): not the thing.
_WHEN_SAID = (r"(?:(?:about|around|nearly|almost|over)\s+)?(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten"
             r"|eleven|twelve|a few|a couple of|several|many|\d+)\s+(?:minutes?|hours?|days?|weeks?|months?|years?"
             r"|decades?)\s+ago|(?:a while|long|ages|years) ago|yesterday|today|last night|this morning"
             r"|(?:back )?in (?:january|february|march|april|may|june|july|august|september|october|november"
             r"|december|\d{4}|the (?:spring|summer|autumn|fall|winter))"
             r"|(?:last|this|next) (?:week|month|year|spring|summer|autumn|fall|winter|night)")
_FILLER = re.compile(r"(?:\s+(?:any ?more|now|too|as well|a lot|so much|very much|lately|recently"
                     rf"|these days|for now|for a while|{_WHEN_SAID}))+$", re.I)
# A liked thing that points at something in the moment ("the color", "all the leaves", "my studio")
# is a remark about it, not a standing taste.
_REFERENTS = re.compile(r"^(?:to|it|that|this|these|those|you|him|her|them|what|how|when|the|all|my|our|his"
                        r"|their)\b|\byour?\b"
                        r"|\b(?:option|idea|answer|suggestion|version|approach|one|way)s?\b")
# The first word of what is (not) eaten or drunk that names no food or drink: a remark about the moment
# ("I can't eat another bite", "I don't eat much when I'm stressed", "I don't drink after 8").
NOT_A_FOOD = frozenset({"another", "any", "anything", "more", "much", "that", "this", "it", "now", "too", "all",
                        "right", "enough", "there", "here", "yet", "so", "out", "the", "today", "tonight",
                        "tomorrow", "again", "anymore", "alone", "like", "what", "these", "those", "after",
                        "before", "until", "late", "a", "properly", "well", "when", "while"})
HAN = re.compile(r"[\u4e00-\u9fff]")  # a Chinese character
_ZH_END = "[^，。！？,.!?；;\\s]"
ZH_PARTICLES = "了的啊呀哦呢吧"


def chinese(text: str) -> bool:
    """Whether ``text`` holds a Chinese character: the fact is then written in Chinese."""
    return HAN.search(text) is not None


# A person a Chinese sentence names: the speaker, the one spoken to, anyone else by a pronoun, people ("人":
# "对花生过敏的人很多"); or what makes it a claim about people at large ("很常见": common).
_ZH_PERSON = re.compile(r"我|咱|你|您|他|她|它|谁|人|常见|普遍|很多|不少|多数|少数")


def speaker_unsaid(sentence: str) -> bool:
    """Whether ``sentence`` is Chinese and names no one, not even its speaker, nor speaks of people at large:
    Chinese drops a subject the listener knows, so what it states of no one is the speaker's ("乳糖不耐受",
    "每天早上跑步")."""
    return chinese(sentence) and _ZH_PERSON.search(sentence) is None


# What opens an English chat sentence before its first verb without being its subject: "Also,", "Big news —".
_OPENING = re.compile(r"(?:(?:oh|also|and|so|well|btw|anyway|update|news|big news|good news|guess what|fyi)\b"
                      r"[\s,:!—–-]*)*", re.I)
# The first verb of a sentence that left its subject out: an -ing form ("Starting as…": "I'm") or a past
# form ("Moved to…": "I"), maybe after how ("Officially retired as of Friday"). Not a bare verb, which opens an
# imperative as often ("Take the train").
_DROPPED = re.compile(r"(?:[A-Za-z]+ly\s+)?(?:(?P<ing>[A-Za-z]{2,}ing)\b|(?P<past>[A-Za-z]{2,}ed|quit|left|got|sold|gave|became|took"
                      r"|began|went|bought))\b(?!')", re.I)
# A finite verb later in the first clause of an -ing opening: the act is the subject the clause goes on to
# judge ("Living in London is expensive"), not what the speaker does.
_ACT_JUDGED = re.compile(r"[^,;:.!?—–]*?\b(?:is|was|are|were|isn't|wasn't|aren't|must|can|could|will|would"
                         r"|should|might|may|makes|made|gets|sucks|seems|feels|sounds|looks|takes|costs|means)\b", re.I)


# A state of a person that opens a statement whose subject was left out ("Allergic to sesame", "Lactose
# intolerant, so…", "Vegan since uni", "Pregnant with our second!"): a closed class of adjectives said of
# people, not of things ("blind", "single" open too many other phrases).
_STATE = re.compile(
    r"(?:(?:lactose|gluten|dairy)\s+)?(?:allergic|intolerant|vegan|vegetarian|pescatarian|diabetic|coeliac|celiac"
    r"|asthmatic|epileptic|pregnant|deaf|married|divorced|engaged|widowed|retired|teetotal|self-employed"
    r"|unemployed|based|bilingual|colou?r-blind|left-handed)\b", re.I)
# "Been vegan since uni", "Been living in Leeds for years": "I've".
_BEEN = re.compile(r"been\b", re.I)


def subject_dropped(sentence: str) -> tuple[int, str] | None:
    """Where an English statement that left its speaker unsaid starts, and the subject it left out ("I'm"
    before an -ing form or a state, "I" before a past form, "I've" before "been"): chat drops a subject the
    listener knows ("Moved to Leeds in May", "Big news — starting as a nurse on Monday", "Allergic to
    sesame btw", "Been vegan since uni"). None for Chinese (``speaker_unsaid``), a question, or an act or
    a state the sentence talks about ("Living in London is expensive", "Vegan food is great")."""
    if chinese(sentence) or sentence.rstrip().endswith("?"):
        return None
    at = opening.end() if (opening := _OPENING.match(sentence)) else 0
    if (state := _STATE.match(sentence, at)) is not None:
        return None if _ACT_JUDGED.match(sentence, state.end()) else (at, "I'm")
    if _BEEN.match(sentence, at):
        return at, "I've"
    verb = _DROPPED.match(sentence, at)
    if verb is None:
        return None
    if verb.group("ing"):
        return None if _ACT_JUDGED.match(sentence, verb.end()) else (at, "I'm")
    return at, "I"


def with_subject(sentence: str, at: int, subject: str) -> str:
    """``sentence`` from ``at`` on, with the ``subject`` it left out put back (``subject_dropped``): "I'm
    allergic to sesame" for "Allergic to sesame"."""
    return f"{subject} {sentence[at:at + 1].lower()}{sentence[at + 1:]}"


def slug(phrase: str) -> str:
    """The slot name of a thing: glossary-canonical ("辣" and "spicy food" → spicy_food), else words."""
    text = re.sub(r"^(?:(?:the|a|an|my|some|any)\s+|吃\s*|喝\s*)", "", phrase.strip().lower())
    if text in _CANON:
        return _CANON[text]
    words = re.findall(r"[a-z0-9]+|[\u4e00-\u9fff]+", text)
    if words and len(words[-1]) > 3 and words[-1].endswith("s") and not words[-1].endswith(("ss", "is", "us")):
        words[-1] = words[-1][:-3] + "y" if words[-1].endswith("ies") else words[-1][:-1]
    joined = "_".join(words)[:40]
    return _CANON.get(joined.replace("_", " "), joined) or hashlib.sha1(text.encode()).hexdigest()[:8]


def clause(text: str) -> str:
    """The object of a statement, cut at the next clause ("peanuts, but I love..." → "peanuts")."""
    head = re.split(r"\s+(?:but|so|because|which|since|though|when|if)\s+|\s+and\s+(?:i|my|we|it)\b",
                    text.strip(), flags=re.I)[0]
    return _FILLER.sub("", head.strip(" '\"")).strip()


def listed(text: str) -> list[str]:
    """The things of "peanuts, tree nuts and shellfish", up to a part that opens a new clause ("please…")."""
    out = []
    for what in (t.strip() for t in _LIST.split(clause(text))):
        if what.split(" ", 1)[0].lower() in _CLAUSE_OPENERS:
            break
        out.append(what)
    return out


_LIST = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or|nor)\s+|[、和及或]")


def first_group(m: re.Match[str], *names: str) -> str:
    """The first of the named groups that matched, or "" (a pattern of alternatives names each its own)."""
    return next((g for g in (m.groupdict().get(n) for n in names) if g), "")


def said_on(now: datetime) -> str:
    return now.strftime("%Y-%m-%d")


def _name(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    value = m.group("v")
    if value.split()[0].lower() in {"not", "a", "an", "the", "just", "back", "later", "now", "when"}:
        return []
    if m.group().startswith("我"):
        return [RuleHit("entity", "identity", "user.name", f"用户的名字是{value}。", 0.8)]
    if m.group().lower().startswith("call"):
        return [RuleHit("entity", "identity", "user.nickname", f"The user wants to be called {value}.", 0.8)]
    return [RuleHit("entity", "identity", "user.name", f"The user's name is {value}.", 0.8)]


# Words that fill the object slot without naming an allergen ("a severe allergy").
_VAGUE = frozenset({"severe", "mild", "bad", "serious", "slight", "food", "some", "something",
                    "anything", "everything", "nothing", "many things", "a lot of things"})


# A comma also starts a new clause ("…allergic to peanuts, please remember that"): the
# list of allergens ends at the first part that opens with one of these.
_CLAUSE_OPENERS = frozenset({"please", "so", "but", "because", "since", "which", "that", "remember",
                             "thanks", "thank", "can", "could", "would", "will", "if", "when", "then",
                             "i", "i'm", "you", "it", "this", "he", "she", "they", "we", "just"})


def allergy(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    who = (m.groupdict().get("who") or "").strip()
    # "peanuts, tree nuts and shellfish" are three allergies, each its own slot.
    return [hit for what in listed(m.group("what")) if (hit := _one_allergy(m, who, what))]


def _one_allergy(m: re.Match[str], who: str, what: str) -> RuleHit | None:
    # "对芒果不再过敏", "对虾已经不怎么过敏": a negation inside the allergen says the allergy is not (or no more).
    if not what or _ZH_NOT.search(what) or len(what.split()) > 3 or what.lower() in _VAGUE:
        return None
    holder = f"user.{slug(who)}" if who else "user"
    zh = chinese(m.group())
    if zh:
        text = f"用户的{who}对{what}过敏。" if who else f"用户对{what}过敏。"
    else:
        text = f"The user's {who} is allergic to {what}." if who else f"The user is allergic to {what}."
    if not who:
        return RuleHit("entity", "health", f"{holder}.allergy.{slug(what)}", text, 0.9)
    return RuleHit("entity", "relationship", f"{holder}.allergy.{slug(what)}", text, 0.9, whose(who, zh))


def whose(who: str, zh: bool) -> str:
    """``about`` of a fact about someone in the user's life, as the user named them ("the user's cat")."""
    return f"用户的{who}" if zh else f"the user's {who}"


def _third_person(verb: str) -> str:
    v = " ".join(verb.lower().split())
    if v.startswith(("don't ", "do not ")):
        return "doesn't " + v.split()[-1]
    if v in ("quit", "given up", "gave up"):
        return "has " + ("given up" if v != "quit" else "quit")
    return v if v.startswith(("stopped", "can")) else v + "s"


# What follows a condition in Chinese ("不喝…就…", "不吃…会…", "…的话"): the clause says what happens then.
_CONSEQUENCE = re.compile(r"就|会|才|的话|得")


def _preference(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    what = clause(m.group("what"))
    if chinese(m.group()):
        what = what.rstrip(ZH_PARTICLES)
        if not what or what[0] in "你他她它这那死" or what == "素":
            return []  # "(不)吃素" is a diet, the diet rules' (``health_patterns``), not a food named 素
        if _CONSEQUENCE.search(what):
            return []  # "不喝下午就废了", "不吃早饭会头晕": not eating or drinking as a condition, not a dislike
        phrase = re.sub(r"^我", "", m.group()).rstrip(ZH_PARTICLES)
        return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"用户{phrase}。", 0.6)]
    if not what or len(what.split()) > 5 or _REFERENTS.search(what.lower()):
        return []
    verb = _third_person(m.group("verb"))
    if re.search(r"\b(?:eat|drink)", verb) and what.split(" ", 1)[0].lower() in NOT_A_FOOD:
        return []  # "I don't eat much when I'm stressed": how, not what
    return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"The user {verb} {third_person_object(what)}.", 0.6)]


_FIRST_PERSON = {"my": "their", "me": "them", "myself": "themself", "mine": "theirs"}


def third_person_object(what: str) -> str:
    """A liked thing as said of the user ("running my own studio" → "running their own studio")."""
    return re.sub(r"\b(my|me|myself|mine)\b", lambda m: _FIRST_PERSON[m.group(1).lower()], what, flags=re.I)


_TOPICS = {"delivery": r"arriv|deliver|\bship|到货|送达|收到|发货|交付|送到",
           "payment": r"\bpa(?:y|id)|payment|invoice|付款|支付|还款",
           "submission": r"submit|report|assignment|提交|交稿|作业|报告"}


_STOP = frozenset({"the", "a", "an", "my", "our", "it", "this", "that", "be", "get", "got", "is",
                   "are", "to", "of", "for", "by", "before", "until", "today", "tonight",
                   "tomorrow", "week", "next", "please"})


def _topic(s: str) -> str:
    """What a deadline is about, as a slot: a known topic, else the obligation's first words."""
    known = next((t for t, rx in _TOPICS.items() if re.search(rx, s, re.I)), None)
    found = re.search(r"\b(?:deadline for|must|has to|have to|need to|needs to|should)\s+([\w ]+?)"
                      r"(?:\s+(?:by|before|until|is|no later)\b|$)", s, re.I)
    found = found or re.search(r"\b(?:my|our|the) ([\w ]+?) (?:is|are) due\b", s, re.I)
    words = [w for w in (found.group(1).lower().split() if found else []) if w not in _STOP]
    return known or "_".join(words[:2]) or "general"


def _deadline(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    mine = re.search(r"\bI (?:must|have to|need to|should|'ve got to)\b|我[^，。]{0,8}?(?:必须|一定要|得|需要)", s)
    kind: MemoryType = "task" if mine else "constraint"
    # A deadline stands until it passes (``expiry``): what the user must get done shapes their plans.
    if chinese(s):
        return [RuleHit(kind, "plan", f"user.deadline.{_topic(s)}", f"用户在{said_on(now)}提出的期限：“{s}”", 0.8,
                        standing=True)]
    return [RuleHit(kind, "plan", f"user.deadline.{_topic(s)}",
                f'The user stated a deadline on {said_on(now)}: "{s}"', 0.8, standing=True)]


def _card(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    digits = m.group("d")
    if chinese(m.group()):
        if "卡" not in s or re.search("手机|电话", s):  # 尾号 also ends phone numbers
            return []
        return [RuleHit("entity", "identifier", f"user.card.{digits}", f"用户的卡尾号为{digits}。", 0.6)]
    noun = " ".join((m.groupdict().get("noun") or "card").split())
    return [RuleHit("entity", "identifier", f"user.card.{digits}", f"The user's {noun} ends in {digits}.", 0.6)]


def _order(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    ident = m.group("id")
    if not re.search(r"\d", ident):
        return []
    key = f"user.order.{ident.lstrip('#').lower()}"
    if m.group().startswith("订单"):
        return [RuleHit("entity", "identifier", key, f"用户的订单号是{ident}。", 0.6)]
    return [RuleHit("entity", "identifier", key, f"The user's order number is {ident}.", 0.6)]


def remind(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    what = m.group("what").strip()
    if m.group().startswith("提醒"):
        what = re.sub(r"^一下", "", what).rstrip("吗吧呢啊。，,")
        if not what:
            return []
        return [RuleHit("task", "task", f"user.task.{slug(what)[:24]}", f"用户要求提醒：{what}。", 0.7)]
    what = clause(what)
    words = [w for w in re.findall(r"[a-z0-9]+", what.lower()) if w not in _STOP]
    return [RuleHit("task", "task", f"user.task.{'_'.join(words[:4]) or slug(what)}",
                f"The user asked to be reminded {m.group('prep')} {what}.", 0.7)]


# Markers of a temporary fact and how long it stays true.
# Not "right now" nor "at the moment", said as often of a state that lasts months ("I'm on a tight budget right
# now, saving for a house") as of one that passes; "for now" says the state is provisional.
_TEMPORARY = [(re.compile(r"\b(?:today|tonight)\b|今天|今晚", re.I), 1),
              (re.compile(r"\btomorrow\b|明天", re.I), 2),
              (re.compile(r"\bthis (?:week|weekend)\b|\bthese days\b|\bfor (?:now|the moment|the time being)\b"
                          r"|这周|本周|这几天|这个周末|暂时", re.I), 7),
              (re.compile(r"\bthis month\b|这个月|本月", re.I), 31)]


def expiry(sentence: str, now: datetime) -> str | None:
    days = lasts_days(sentence)
    return None if days is None else (now + timedelta(days=days)).isoformat()


def for_now(sentence: str) -> bool:
    """Whether ``sentence`` is said of a time frame that ends soon ("today", "this week", "这几天"): a
    standing fact read from it would not stand. Not "these days", which says "lately" as often as "for now"
    ("I use a walker these days")."""
    return lasts_days(re.sub(r"\bthese days\b", "", sentence, flags=re.I)) is not None


# A first person only supposed, pretended, wished or seen from outside ("let's say I'm allergic",
# "pretend I live in London", "如果我住在上海就好了"; not "like I said"): what the supposition
# governs is no fact about the user. A supposition governs what follows it in its clause ("I'm
# allergic to cats, so who knows if I'll ever get one" and "I don't know if I told you, but I live in
# Leeds" still state their facts); "就好了" (if only) the clause it ends.
_SUPPOSED = re.compile(
    r"\b(?:if|as if|as though|(?:looks?|looked|sounds?|sounded|feels?|felt|seems?|seemed) like|let's say"
    r"|pretend(?:ing)?|imagin(?:e|ing)|suppos(?:e|ing)|assum(?:e|ing)|wish(?:ed)?|hypothetically)\s+(?:that\s+)?I\b"
    r"|(?:如果|假如|假设|假若|倘若|要是|万一|假装|想象|设想|但愿)我",
    re.I,
)
_WISHED = re.compile(r"[^，,;；。！？!?]*就好了")
_SUPPOSITION_END = re.compile(r"[,;:，；：]")


def supposed(sentence: str, start: int) -> bool:
    """Whether what ``sentence`` says from ``start`` on is only supposed or wished (``_SUPPOSED``)."""
    return any(
        m.start() <= start and _SUPPOSITION_END.search(sentence, m.end(), start) is None
        for m in _SUPPOSED.finditer(sentence)
    ) or _WISHED.match(sentence, start) is not None


def lasting(rule: Rule) -> Rule:
    """``rule`` for a fact that only stands: it reads nothing from a sentence said for now (``for_now``)."""

    def read(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
        return [] if for_now(s) else rule(m, s, now)

    return read


def lasts_days(sentence: str) -> int | None:
    """How many days a temporary statement stays true ("today": 1, "this week": 7), None when it is not one."""
    return next((d for rx, d in _TEMPORARY if rx.search(sentence)), None)


_DATE = (r"(?:(?:next |this )?(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|today"
         r"|noon|midnight|(?:the )?end of (?:the |this |next )?(?:day|week|month|year)"
         r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?"
         r"|\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
         r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?|the \d{1,2}(?:st|nd|rd|th)"
         r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*)")
NAME_EN = r"(?P<v>[A-Za-z][\w'-]*(?: [A-Z][\w'-]*){0,2})"
NAME_ZH = r"(?P<v>(?![了过着你他她它])[\u4e00-\u9fff·]{2,4}?(?=$|[\s，。！？、,.!?；;~]|[我今是在的，])|[A-Za-z][\w'-]*)"
_OBJ = r"(?P<what>[^.,;!?\n]+)"
_ZH_OBJ = f"(?P<what>{_ZH_END}{{1,10}})"
ZH_KIN = "猫|狗|女儿|儿子|孩子|宝宝|妻子|老婆|丈夫|老公|妈妈|爸爸|母亲|父亲|朋友"
# Those in the user's care, the only others whose health the rules read ("my dog", "our son Leo"):
# not a friend, a colleague, the office or the company.
CARE = (r"(?:dog|cat|puppy|kitten|pet|bird|parrot|budgie|rabbit|bunny|hamster|guinea pig|ferret|turtle|tortoise"
        r"|lizard|snake|fish|goldfish|horse|pony|son|daughter|kid|kids|child|children|baby|toddler|twins|wife"
        r"|husband|partner)(?: [A-Z][\w'-]*)?")
_ZH_NOT = re.compile(r"[不没]")
ZH_CARE = "猫咪|狗狗|猫|狗|鹦鹉|兔子|仓鼠|宠物|女儿|儿子|孩子|宝宝|妻子|老婆|丈夫|老公"
ZH_ADV = "(?:现在|已经|从此|以后|也|还|很|非常|特别|超级|最|挺|比较|真的|一直)?"

RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(r"\b(?i:my name is|my name's) " + NAME_EN), _name),
    (re.compile(r"\b(?i:call me) (?P<v>[A-Z][\w'-]*)"), _name),
    (re.compile(r"(?:我叫|我名叫|我的名字(?:是|叫))" + NAME_ZH), _name),
    (re.compile(r"\b(?:I'm|I am|Im|(?:my|our) (?P<who>" + CARE + r")(?: is| are|'s)) (?:(?:very|severely|mildly"
                r"|extremely|seriously|really|also|deathly|highly) ){0,2}allergic to (?P<what>[^.;!?\n]+)", re.I),
     allergy),
    (re.compile(r"\bI have an? (?:severe |mild )?(?P<what>[\w ]{2,30}?) allerg(?:y|ies)\b", re.I), allergy),
    (re.compile(r"我(?:的|家)?(?P<who>" + ZH_CARE + r")?(?:也|都|有点|非常|很)?对"
                r"(?P<what>[^，。！？,.!?；;\s]{1,12}?)(?:有点|非常|很|严重|也)?过敏"), allergy),
    (re.compile(r"\bI(?:'ve| have)? (?:really |also |absolutely |just |do |still |always )?(?P<verb>love|like"
                r"|enjoy|prefer|adore|hate|dislike|can't stand|cannot stand|don't like|do not like|don't eat"
                r"|do not eat|don't drink|never (?:eat|drink)|no longer (?:eat|like|drink)|stopped (?:eating|drinking)"
                r"|quit|given up|gave up) " + _OBJ, re.I),
     _preference),
    (re.compile(f"我{ZH_ADV}(?:不再|再也不|不)(?:太)?(?:喜欢|吃|喝){_ZH_OBJ}"), _preference),
    (re.compile(f"不再?(?:吃|喝){_ZH_OBJ}了"), _preference),
    (re.compile(f"我{ZH_ADV}(?:讨厌|喜欢|爱吃|爱喝|偏爱|爱){_ZH_OBJ}"), _preference),
    (re.compile(r"\b(?:must|has to|have to|needs? (?:to|it|this|that|them|the)|should|got to|required|due(?! to))\b"
                r"[^.!?;]{0,60}?\b(?:by|before|no later than|until)\s+" + _DATE + r"\b", re.I), _deadline),
    (re.compile(r"\bdeadline\b[^.!?;]{0,40}?\b(?:is|was|moved to|:)\s*" + _DATE, re.I), _deadline),
    (re.compile(r"截止(?:日期|时间)(?:是|为|在|：|:)|(?:之前|以前)(?:必须|一定要|务必|得|要)"
                r"|必须在.{1,12}?(?:之前|以前)|(?:最晚|最迟).{1,12}?(?:之前|以前)"), _deadline),
    (re.compile(r"(?P<noun>(?:(?:visa|mastercard|amex|platinum|gold|silver|credit|debit|business)\s+)*"
                r"(?:card|visa|mastercard|amex))\b[^.!?;\d]{0,20}?\b(?:ending|ends|last (?:4|four)"
                r"(?: digits)?)(?:\s+(?:in|with|are|is|of))?\s*:?\s*(?P<d>\d{4})(?!\d)", re.I), _card),
    (re.compile(r"\[card \*{4}(?P<d>\d{4})\]"), _card),
    (re.compile(r"(?:尾号|卡号后四位|后四位)(?:是|为)?\s*(?P<d>\d{4})(?!\d)"), _card),
    (re.compile(r"\border\s*(?:number|no\.?|id)?\s*(?:is\s*)?:?\s*(?P<id>#?[A-Z0-9][A-Z0-9-]{3,19})\b",
                re.I), _order),
    (re.compile(r"订单(?:号|编号)?(?:是|为)?\s*[:：]?\s*(?P<id>#?[A-Za-z0-9-]{4,20})"), _order),
    # A request ("Remind me to…", "please/can you remind me…"), not a remark ("these moments remind me to…").
    (re.compile(r"(?:^|[,:;]\s*|\b(?:please|pls|can you|could you|would you|will you|and|also)\s+)(?:please\s+)?"
                r"remind me (?P<prep>to|that|about) (?P<what>[^.!?;\n]+)", re.I), remind),
    (re.compile(r"提醒我(?P<what>[^。！？!?\n]+)"), remind),
    (re.compile(f"我{ZH_ADV}戒(?P<what>辣|烟|酒|咖啡|糖|肉)了?"), _preference),
]
