"""The rule-based extractor's patterns for the user's life: their language, home, job, people and pets, habits.

Identity slots the profile shows: the native language ("I'm a native Spanish
speaker", "我的母语是粤语": ``user.language``) and the one replies should be in
("Please always answer in French": ``user.language.reply``); the names of the
people and pets in the user's life ("My dog is called Pepper", "My daughter
Mia is 6", "我的狗叫豆豆": ``user.<who>.name``); an occupation ("I work as a
nurse": ``user.occupation``); and a home however it is said ("I live in
Lyon", "We just relocated to Austin", "My new address is …", "我搬到杭州了":
``user.location.home``, the one slot a later move supersedes). Where the user
is for now ("I'm in Paris this week") is an event that expires
(``user.location.current``).

Tastes: "I drink three cups of coffee a day" / "我每天都喝三杯咖啡" is a
preference of the slot (``user.preference.<thing>``) that quitting it later
names ("我戒咖啡了"), so the key rule supersedes the habit and its turn instead
of leaving it a plain turn that keeps being recalled; so do a switch ("I've
switched from coffee to tea") and a taste gone ("I'm not into sushi
anymore"). English and Chinese, the user's own statements only.
"""

from __future__ import annotations

import re
from datetime import datetime

from .rule_patterns import (
    NAME_EN,
    NAME_ZH,
    ZH_ADV,
    ZH_KIN,
    ZH_PARTICLES,
    Rule,
    RuleHit,
    chinese,
    clause,
    expiry,
    first_group,
    lasting,
    said_on,
    slug,
    third_person_object,
    whose,
)


def _named(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"My dog is called Pepper", "我的狗叫豆豆": the name of someone in the user's life."""
    who, value = m.group("who"), m.group("v")
    if value.split()[0].lower() in {"not", "a", "an", "the", "just", "so", "very", "really"}:
        return []
    zh = chinese(who)
    about = whose(who, zh)
    if zh:
        return [RuleHit("entity", "relationship", f"user.{slug(who)}.name", f"用户的{who}叫{value}。", 0.7, about)]
    return [RuleHit("entity", "relationship", f"user.{slug(who)}.name", f"The user's {who.lower()} is called {value}.",
                    0.7, about)]


def _habit(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I drink three cups of coffee a day", "我每天都喝三杯咖啡": a standing habit, the slot a quit supersedes."""
    what = m.group("what").strip()
    if chinese(m.group()):
        what = what.rstrip(ZH_PARTICLES)
        if not what or what[0] in "你他她它这那什":
            return []
        return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"用户{m.group().removeprefix('我')}。", 0.6)]
    phrase = " ".join(m.group().split()[1:])
    verb, _, rest = phrase.partition(" ")
    return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"The user {verb}s {rest}.", 0.6)]


def _reply_language(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"Please always answer in French", "From now on reply in German": the language the user wants back."""
    return [RuleHit("entity", "identity", "user.language.reply", f"The user wants replies in {m.group('lang')}.", 0.8)]


# A span said right after a move or a base ("for the summer", "for three months", "for a few weeks"): a stay.
_STAY = re.compile(r"[^,;.!?]{0,30}?\bfor (?:the (?:\w+ )?(?:summer|winter|spring|autumn|fall|semester|term|season"
                   r"|holidays?|week|month|year)|(?:a|an|one|two|three|four|five|six|\d+|a few|a couple of|several)"
                   r" (?:days?|nights?|weeks?|months?))\b", re.I)


def _home(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """A home however it is said: a move, "now live in", an address. One slot, so a move supersedes it."""
    if _WORKPLACE.search(_clause_of(s, m)):
        return []  # "I'm based in the Shanghai office", "our building's address is ...": not the user's home
    if _STAY.match(s, m.end()):
        return []  # "I moved to Leeds for the summer": a stay, not a home (left to the reader by meaning)
    if address := m.groupdict().get("address"):
        where = address.strip().rstrip(",")
        if chinese(m.group()):
            return [RuleHit("entity", "identity", "user.location.home", f"用户的地址是{where}。", 0.6)]
        return [RuleHit("entity", "identity", "user.location.home", f"The user's home address is {where}.", 0.6)]
    place = first_group(m, "place", "place2").strip().rstrip(",")
    if chinese(place):
        return [RuleHit("entity", "identity", "user.location.home", f"用户住在{place}。", 0.6)]
    return [RuleHit("entity", "identity", "user.location.home", f"The user lives in {place}.", 0.6)]


def _clause_of(s: str, m: re.Match[str]) -> str:
    """The clause of ``s`` that holds the match: "The office is in Chicago but I live in Evanston" is
    two statements, and only the first is about the office."""
    breaks = list(_CLAUSE_BREAK.finditer(s))
    start = max((b.end() for b in breaks if b.end() <= m.start()), default=0)
    end = min((b.start() for b in breaks if b.start() >= m.end()), default=len(s))
    return s[start:end]


@lasting
def _spoken(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I speak German and some French", "我会说粤语": each language the user speaks, a slot of its own."""
    named = [w for part in re.split("[和、及与]", m.group("langs")) for w in re.findall(r"[A-Z][a-z]+|\S+", part)]
    found = [lang for lang in named
             if lang in _LANGUAGES or (chinese(lang) and lang not in _ZH_NOT_A_LANGUAGE)]
    if chinese(m.group()):
        return [RuleHit("entity", "identity", f"user.language.spoken.{slug(lang)}", f"用户会说{lang}。", 0.7)
                for lang in found]
    return [RuleHit("entity", "identity", f"user.language.spoken.{slug(lang)}", f"The user speaks {lang}.", 0.7)
            for lang in found]


def _pronouns(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    said = m.group("p").lower()
    return [RuleHit("entity", "identity", "user.pronouns", f"The user's pronouns are {said}.", 0.8)]


@lasting
def _schedule(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I work nights", "I work from home", "我上夜班": how the user works, which shapes when and where."""
    if chinese(m.group()):
        return [RuleHit("entity", "identity", "user.work.schedule", f"用户{m.group().removeprefix('我')}。", 0.6)]
    how = " ".join(m.group("how").lower().split())
    return [RuleHit("entity", "identity", "user.work.schedule", f"The user works {how}.", 0.6)]


def _place(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """Where the user is for now ("I'm in Paris this week", "这周我在上海出差"): an event, gone with its time frame."""
    place = m.group("place")
    if not expiry(s, now):
        return []  # "I'm in Paris" with no time frame is too ambiguous to keep.
    if chinese(s):
        return [RuleHit("event", "plan", "user.location.current", f"用户在{said_on(now)}说：“{s}”", 0.4)]
    return [RuleHit("event", "plan", "user.location.current",
                f"On {said_on(now)} the user said they are in {place}: \"{s}\"", 0.4)]


def _occupation(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    job = " ".join(first_group(m, "job", "job2").split())
    if chinese(job):
        return [RuleHit("entity", "identity", "user.occupation", f"用户是{job}。", 0.7)]
    article = "an" if job[:1].lower() in "aeiou" else "a"
    return [RuleHit("entity", "identity", "user.occupation", f"The user is {article} {job.lower()}.", 0.7)]


def _retired(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    if chinese(m.group()):
        return [RuleHit("entity", "identity", "user.occupation", "用户已退休。", 0.7)]
    return [RuleHit("entity", "identity", "user.occupation", "The user is retired.", 0.7)]


def _favourite(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"My favorite color is green": a durable preference, its slot named by what it is a favourite of."""
    of, what = m.group("of").strip(), clause(m.group("what"))
    if not what or len(what.split()) > 5:
        return []
    return [RuleHit("preference", "preference", f"user.preference.favorite_{slug(of)}",
                    f"The user's favorite {of.lower()} is {third_person_object(what)}.", 0.6)]


def _gone_off(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I'm not into sushi anymore", "I've gone off coffee": a taste ended, in its slot."""
    what = clause(first_group(m, "what", "what2"))
    if not what or len(what.split()) > 4 or what.split()[0].lower() in _NOT_A_TASTE:
        return []
    return [RuleHit("preference", "preference", f"user.preference.{slug(what)}",
                    f"The user no longer likes {third_person_object(what)}.", 0.6)]


def _switched(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I've switched from coffee to tea": the old taste's slot ended and the new one's taken up."""
    old, new = clause(m.group("old")), clause(m.group("new"))
    if not old or not new or len(new.split()) > 4 or len(old.split()) > 4:
        return []
    return [RuleHit("preference", "preference", f"user.preference.{slug(old)}", f"The user has switched from {old} to {new}.", 0.6),
            RuleHit("preference", "preference", f"user.preference.{slug(new)}", f"The user now prefers {new} (instead of {old}).",
                    0.6)]


# A sentence about where the user works, not where they live.
_WORKPLACE = re.compile(r"\b(?:office|offices|company|firm|employer|team|department|building|floor|campus"
                        r"|headquarters|HQ|branch|factory|warehouse|store|shop|school|startup|workplace|coworking"
                        r"|tower|suite|unit|room|wing|level|desk|lab|studio|site|business)\b"
                        r"|公司|办公室|大楼|楼层|部门|单位|工厂|学校|\d+楼|[一二三四五六七八九十]+楼", re.I)
# What one "会说" that ends in 话 without being a language: "我会说实话" is "I'll tell the truth".
_ZH_NOT_A_LANGUAGE = frozenset({"实话", "真话", "假话", "好话", "坏话", "废话", "大话", "谎话", "情话", "笑话", "闲话",
                                "心里话", "悄悄话", "客气话", "电话", "的话", "这话", "那话", "人话"})
# Where one statement of a sentence ends and another begins.
_CLAUSE_BREAK = re.compile(r",?\s+(?:but|while|whereas|although|though)\s+|;\s*|，|；|但是?|不过")
_LANGUAGES = frozenset({
    "English", "Spanish", "French", "German", "Italian", "Portuguese", "Dutch", "Russian", "Polish", "Ukrainian",
    "Czech", "Greek", "Turkish", "Arabic", "Hebrew", "Persian", "Farsi", "Hindi", "Urdu", "Bengali", "Punjabi",
    "Tamil", "Telugu", "Marathi", "Gujarati", "Chinese", "Mandarin", "Cantonese", "Japanese", "Korean",
    "Vietnamese", "Thai", "Indonesian", "Malay", "Tagalog", "Filipino", "Swahili", "Amharic", "Yoruba", "Zulu",
    "Swedish", "Norwegian", "Danish", "Finnish", "Icelandic", "Hungarian", "Romanian", "Bulgarian", "Serbian",
    "Croatian", "Slovak", "Slovenian", "Irish", "Welsh", "Catalan", "Basque", "Galician", "Latvian", "Lithuanian",
    "Estonian", "Albanian", "Armenian", "Georgian", "Kurdish", "Pashto", "Nepali", "Sinhala", "Khmer", "Lao",
    "Burmese", "Mongolian", "Haitian", "Creole", "Somali", "Hausa", "Igbo"
})
_NOT_A_TASTE = frozenset({"it", "that", "this", "you", "him", "her", "them", "the", "what", "how"})
_JOBS = (r"nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|midwife|vet|veterinarian|therapist"
         r"|teacher|professor|lecturer|tutor|student|lawyer|attorney|judge|accountant|engineer|software engineer"
         r"|software developer|developer|programmer|data scientist|designer|architect|pilot|flight attendant|chef"
         r"|baker|barista|waiter|waitress|farmer|electrician|plumber|carpenter|mechanic|firefighter|police officer"
         r"|journalist|writer|translator|musician|photographer|scientist|researcher|consultant|truck driver"
         r"|social worker|pastor|priest|soldier|librarian|cashier|nanny|caregiver|carer")
_ZH_JOBS = "护士|医生|老师|教师|律师|会计|工程师|程序员|设计师|厨师|司机|学生|警察|记者|翻译|飞行员|药剂师|兽医"
_PLACE = r"(?P<place>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2}(?:, [A-Z][\w'-]*(?: [A-Z][\w'-]*)?)?)"
_KIN = (r"dog|cat|puppy|kitten|pet|bird|rabbit|hamster|horse|son|daughter|wife|husband|partner|boyfriend|girlfriend"
        r"|brother|sister|baby|kid|mom|dad|mother|father")


def _language(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I'm a native Spanish speaker", "我的母语是粤语": the language the user thinks in."""
    lang = first_group(m, "lang", "lang2", "lang3")
    if chinese(lang):
        return [RuleHit("entity", "identity", "user.language", f"用户的母语是{lang}。", 0.8)]
    return [RuleHit("entity", "identity", "user.language", f"The user's native language is {lang}.", 0.8)]


LIFE_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(rf"\b(?i:my) (?P<who>{_KIN})(?:'s name is| is called| is named| named) "
                + NAME_EN.replace("A-Za-z", "A-Z")), _named),
    # "My daughter Mia is 6", "our dog Rex loves walks", "my cat Luna sleeps on my keyboard": a name in
    # apposition, then one of the verbs said of a person or a pet (a closed class: "My dog Sunday walks are
    # the best" names no dog), or "'s" or an age in brackets ("my daughter Maya's turning 4", "my son Leo
    # (9)"), not "my wife I think".
    (re.compile(rf"\b(?i:my|our) (?P<who>{_KIN}) (?P<v>(?!I\b)[A-Z][a-z][\w'-]*?)"
                r"(?='s\b| \(|,? (?:is|was|has|loves|likes"
                r"|turned|turns|can't|cannot|just|and|who|will|gets|needs|sleeps|lives|goes|plays|works|eats|hates"
                r"|adores|enjoys|started|studies|attends|barks|follows|refuses|keeps|still|always|never)\b)"),
     _named),
    # A move ("I moved to", "we relocated to"), never one said of a workplace (``_WORKPLACE``).
    (re.compile(r"\b(?i:(?:I|we)(?:'ve| have)? (?:just |recently |finally |now )?(?:relocated|moved) (?:to|into)) "
                + _PLACE), _home),
    (re.compile(r"\b(?i:(?:I|we) (?:now |currently )?live in|I'm based in|I am based in) " + _PLACE), _home),
    (re.compile(r"\b(?i:my (?:new |home |current |delivery |shipping )?address is) (?P<address>\d[^.;!?\n]{4,80})"),
     _home),
    (re.compile(r"我们?(?:现在|目前|已经)?住在(?P<place>[\u4e00-\u9fff]{2,8}?)(?=$|[，。！？,.!?\s])"), _home),
    # 我搬到 / 我们搬到 / 我们家搬到 (as "I" or "we moved"), not 我们公司搬到了五楼 (the company's move).
    (re.compile(r"我(?:们家|们|家)?(?:上周末?|周末|上个月|上星期|去年|今年|前几天|前段时间|已经|刚刚?|最近|现在|终于|才|也){0,3}搬到了?(?P<place>[\u4e00-\u9fff]{2,8}?)(?=$|了|[，。！？,.!?\s])"),
     _home),
    (re.compile(r"\bI(?:'m| am) (?:currently |staying |traveling |travelling )?(?:in|at) "
                r"(?P<place>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2})"), _place),
    (re.compile(r"(?:这周|本周|这几天|今天|明天|这个周末)我?(?:在|去)(?P<place>[\u4e00-\u9fff]{2,6}?)"
                r"(?:出差|旅行|旅游|度假|玩|开会)"), _place),
    (re.compile(r"我(?:的)?(?:新|家庭|收货)?地址(?:是|为)[:：]?(?P<address>[^。！？!?\n]{4,60})"), _home),
    (re.compile(r"\b(?i:(?:please |and )?(?:always|from now on,?|going forward,?) (?:please )?(?:answer|reply|respond"
                r"|write|talk)(?: to me)? in) (?P<lang>[A-Z][a-z]+)\b"), _reply_language),
    # "I work as", "I'm starting as", "I've started as": not "I worked as", a job of the past.
    (re.compile(rf"\b(?i:I (?:work|start)|I(?:'m| am) (?:working|starting|employed)|I(?:'ve| have) (?:started|begun)"
                rf"(?: working)?) as an? (?:[\w-]+ )??(?P<job>{_JOBS})\b"
                rf"|\b(?i:I'm an?|I am an?) (?:(?!(?:terrible|bad|good|great|decent|lousy|awful|better|worse|big|huge"
                rf"|fan)\b)[\w-]+ )?(?P<job2>{_JOBS})(?: (?i:by (?:profession|trade)))?(?=$|[,.;!]| and\b| at\b"
                r"| in\b| for\b)", re.I), _occupation),
    (re.compile(f"我(?:是(?:一名|一个|一位)?|在做|当)(?P<job>{_ZH_JOBS})"), _occupation),
    # Retired, which ends any job: "I retired from teaching", "I'm retired now", "我去年退休了"; not "I retired the
    # old laptop" (an object), "retired from playing rugby" (a sport), nor "I'm not retired".
    (re.compile(r"\bI(?:'m| am|'ve| have)?(?: been)? (?:\w+ly |now |just )?retired\b(?! (?:the|my|our|a|an|it|that|this"
                r"|from (?:playing|competitive|the (?:team|band|club|league)))\b)", re.I), _retired),
    (re.compile(r"我(?:已经|刚刚?|去年|今年|上个月|上周|前年|早就)?(?:正式)?退休"), _retired),
    (re.compile(r"\b(?i:my (?:favou?rite|fave)) (?P<of>[a-z][a-z ]{1,20}?) (?:is|are) (?P<what>[^.,;!?\n]+)", re.I),
     _favourite),
    (re.compile(r"\bI(?:'m| am) (?:just )?not (?:really )?(?:into|a fan of|keen on) (?P<what>[^.,;!?\n]+?)"
                r" any ?more\b|\bI(?:'ve| have) gone off (?P<what2>[^.,;!?\n]+)", re.I),
     _gone_off),
    (re.compile(r"\bI(?:'ve| have)? (?:switched|changed|moved) from (?P<old>[a-z][\w ]{1,30}?) to "
                r"(?P<new>[a-z][\w ]{1,30}?)(?=$|[.,;!?]| now\b| because\b| since\b)", re.I), _switched),
    (re.compile(f"我(?:的|家)?(?:小)?(?P<who>{ZH_KIN}|狗狗|猫咪|宠物)(?:的名字)?(?:叫|叫做|名叫|是叫)" + NAME_ZH), _named),
    (re.compile(r"\bI (?P<verb>drink|eat) (?:(?:a|one|two|three|four|five|\d+) (?:cups?|glass(?:es)?|bottles?"
                r"|cans?|mugs?|shots?) of )?(?P<what>[a-z]+(?: [a-z]+)?) (?:every (?:day|morning|evening|night)"
                r"|daily|a day|each day)\b", re.I), _habit),
    (re.compile(f"我(?:每天|每周|天天|每天早上|每晚|平时|经常){ZH_ADV}都?(?:要)?(?:喝|吃)"
                r"(?:[一二两三四五六七八九十几\d]+(?:杯|碗|个|瓶|块|片|罐|根))?(?P<what>[\u4e00-\u9fff]{1,6}?)"
                r"(?=$|[，。！？,.!?；;\s])"), _habit),
    (re.compile(r"\b(?i:I'm a native|I am a native) (?P<lang>[A-Z][a-z]+) (?i:speaker)"
                r"|\b(?i:my (?:native|first|mother) (?:language|tongue) is) (?P<lang2>[A-Z][a-z]+)"
                r"|\b(?i:I speak) (?P<lang3>[A-Z][a-z]+) (?i:natively|as my (?:first|native|mother) (?:language|tongue))"),
     _language),
    (re.compile(r"我的(?:母语|第一语言)是(?P<lang>[\u4e00-\u9fff]{1,4}?(?:语|话|文))"), _language),
    # "I speak German and a little French" (not "I speak to my boss", "I speak up"): languages by name.
    (re.compile(r"\bI (?:also |only |mainly |mostly )?speak (?P<langs>(?:(?:a (?:little|bit of)|some|basic|fluent"
                r"|good|decent|conversational|only)\s+)?[A-Z][a-z]+(?:(?:,\s*| and | or )(?:(?:a (?:little|bit of)"
                r"|some|basic|fluent|good|decent|conversational)\s+)?[A-Z][a-z]+)*)"), _spoken),
    (re.compile(r"我(?:也|只|还)?会(?:说|讲)(?P<langs>[\u4e00-\u9fff]{1,4}?(?:语|话|文)(?:和[\u4e00-\u9fff]{1,4}?(?:语|话|文))*)"),
     _spoken),
    (re.compile(r"\b(?i:my pronouns are|I use|I go by) (?P<p>(?:she|he|they|ze|xe)/(?:her|him|them|hir|zir|xem)"
                r"(?:/(?:hers|his|theirs))?)(?: (?i:pronouns))?"), _pronouns),
    (re.compile(r"\b(?i:home (?:for me |for us )?is) " + _PLACE + r"|\b(?i:I call) " + _PLACE.replace("place", "place2")
                + r"(?i: home)\b"), _home),
    (re.compile(r"\bI (?:usually |mostly |always |only )?work (?P<how>nights|night shifts|the night shift|evenings"
                r"|weekends|from home|remotely|part[- ]time|full[- ]time|shifts)\b", re.I), _schedule),
    (re.compile(r"我(?:一直|平时|经常|现在)?(?:上|值)夜班|我(?:一直|平时|现在)?在家(?:办公|工作)"), _schedule),
]
