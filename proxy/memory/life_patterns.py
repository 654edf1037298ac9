"""The rule-based extractor's patterns for the user's life: their language, the names of their people and pets, their habits.

"I'm a native Spanish speaker" / "我的母语是粤语" (``user.language``) and
"My dog is called Pepper" / "我的狗叫豆豆" (``user.<who>.name``) are identity
slots the profile shows; "I drink three cups of coffee a day"
/ "我每天都喝三杯咖啡" is a preference of the slot (``user.preference.<thing>``)
that quitting it later names ("我戒咖啡了"), so the key rule supersedes the
habit and its turn instead of leaving it a plain turn that keeps being
recalled. English and Chinese, the user's own statements only.
"""

from __future__ import annotations

import re
from datetime import datetime

from .rule_patterns import _NAME_EN, _NAME_ZH, _ZH_ADV, _ZH_KIN, _ZH_PARTICLES, Rule, RuleHit, slug


def _named(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"My dog is called Pepper", "我的狗叫豆豆": the name of someone in the user's life."""
    who, value = m.group("who"), m.group("v")
    if value.split()[0].lower() in {"not", "a", "an", "the", "just", "so", "very", "really"}:
        return []
    if re.search(r"[\u4e00-\u9fff]", who):
        return [RuleHit("entity", f"user.{slug(who)}.name", f"用户的{who}叫{value}。", 0.7)]
    return [RuleHit("entity", f"user.{slug(who)}.name", f"The user's {who.lower()} is called {value}.", 0.7)]


def _habit(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I drink three cups of coffee a day", "我每天都喝三杯咖啡": a standing habit, the slot a quit supersedes."""
    what = m.group("what").strip()
    if re.search(r"[\u4e00-\u9fff]", m.group()):
        what = what.rstrip(_ZH_PARTICLES)
        if not what or what[0] in "你他她它这那什":
            return []
        return [RuleHit("preference", f"user.preference.{slug(what)}", f"用户{m.group().removeprefix('我')}。", 0.6)]
    phrase = " ".join(m.group().split()[1:])
    verb, _, rest = phrase.partition(" ")
    return [RuleHit("preference", f"user.preference.{slug(what)}", f"The user {verb}s {rest}.", 0.6)]


def _language(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I'm a native Spanish speaker", "我的母语是粤语": the language the user thinks in."""
    lang = m.group("lang") or m.groupdict().get("lang2") or ""
    if re.search(r"[\u4e00-\u9fff]", lang):
        return [RuleHit("entity", "user.language", f"用户的母语是{lang}。", 0.8)]
    return [RuleHit("entity", "user.language", f"The user's native language is {lang}.", 0.8)]


LIFE_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(r"\b(?i:my) (?P<who>dog|cat|puppy|kitten|pet|bird|rabbit|hamster|horse|son|daughter|wife|husband"
                r"|partner|boyfriend|girlfriend|brother|sister|baby|kid|mom|dad|mother|father)(?:'s name is| is called"
                r"| is named| named) " + _NAME_EN.replace("A-Za-z", "A-Z")), _named),
    (re.compile(f"我(?:的|家)?(?:小)?(?P<who>{_ZH_KIN}|狗狗|猫咪|宠物)(?:的名字)?(?:叫|叫做|名叫|是叫)" + _NAME_ZH), _named),
    (re.compile(r"\bI (?P<verb>drink|eat) (?:(?:a|one|two|three|four|five|\d+) (?:cups?|glass(?:es)?|bottles?"
                r"|cans?|mugs?|shots?) of )?(?P<what>[a-z]+(?: [a-z]+)?) (?:every (?:day|morning|evening|night)"
                r"|daily|a day|each day)\b", re.I), _habit),
    (re.compile(f"我(?:每天|每周|天天|每天早上|每晚|平时|经常){_ZH_ADV}都?(?:要)?(?:喝|吃)"
                r"(?:[一二两三四五六七八九十几\d]+(?:杯|碗|个|瓶|块|片|罐|根))?(?P<what>[\u4e00-\u9fff]{1,6}?)"
                r"(?=$|[，。！？,.!?；;\s])"), _habit),
    (re.compile(r"\b(?i:I'm a native|I am a native) (?P<lang>[A-Z][a-z]+) (?i:speaker)"
                r"|\b(?i:my (?:native|first|mother) (?:language|tongue) is) (?P<lang2>[A-Z][a-z]+)"), _language),
    (re.compile(r"我的(?:母语|第一语言)是(?P<lang>[\u4e00-\u9fff]{1,4}?(?:语|话|文))"), _language),
]
