"""The rule-based extractor's patterns for activities given up or taken up, and what happened to the body.

"I don't run anymore since my knee surgery, I swim now" says three standing
facts: running stopped (``user.preference.running`` — the slot of every taste
of running, which a stop supersedes: ``lifecycle.slot_members``), swimming
taken up (``user.preference.swimming``), and a knee operated on
(``user.health.knee``, a health constraint the profile shows first). The same
in Chinese ("膝盖手术以后我不跑步了，现在改游泳了"). An activity is a verb of
``activities.VERBS`` or "play/do/go" + its object; the user's own statements only.
"""

from __future__ import annotations

import re
from datetime import datetime

from .activities import BODY_PARTS, OBJECT_VERBS, VERBS, ZH_ACTIVITY, ZH_BODY_PARTS, gerund
from .rule_patterns import Rule, RuleHit, first_group, slug, third_person_object

_HEALTH_IMPORTANCE = 0.9
_ACTIVITY_IMPORTANCE = 0.6
# The verb and, for play/do/go, its object ("play tennis", "go running", "play the piano").
_ACT = rf"(?P<verb>{VERBS}|(?P<ov>{OBJECT_VERBS}) (?P<obj>(?:the )?[a-z]+))"
# An activity's gerund, with an object that is not the start of another clause ("running marathons").
# Nor a word of when ("I quit smoking three months ago", "I stopped running last year").
_NOT_OBJECT = (r"(?!(?:since|because|after|and|but|so|when|for|to|a|an|the|my|in|on|at|with|now|anymore|last|this"
               r"|next|yesterday|today|every|once|twice|one|two|three|four|five|six|seven|eight|nine|ten|few"
               r"|several|\d+)\b)")
_GERUND = (rf"(?P<ing>(?:{'|'.join(gerund(v) for v in VERBS.split('|'))})(?: {_NOT_OBJECT}[a-z]+)?"
           r"|playing (?:the )?[a-z]+|yoga|pilates)")
# Why it stopped, when the user says it: "since my knee surgery", "after I hurt my back".
_REASON = re.compile(r"\b(?:since|after|because of|due to|ever since)\s+(?P<why>(?:my|a|an|the)\b[^.,;!?]{2,40})", re.I)
_ZH_REASON = re.compile(rf"(?P<why>(?:{ZH_BODY_PARTS})(?:做了|动了|受了?)?(?:手术|受伤|伤|骨折|扭伤))")


def _activity(m: re.Match[str]) -> str:
    if ing := first_group(m, "ing"):
        return ing.lower()
    if m.groupdict().get("ov"):
        return gerund(m.group("ov"), m.group("obj"))
    return gerund(m.group("verb"))


def _reason(s: str) -> str:
    found = _REASON.search(s)
    return f", since {third_person_object(found.group('why').strip())}" if found else ""


def _stopped(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I don't run anymore", "I stopped playing tennis", "我不跑步了": the activity's slot, ended."""
    if what := first_group(m, "zh"):
        why = _ZH_REASON.search(s)
        text = f"用户{'因' + why.group('why') + '，' if why else ''}不再{what}了。"
        return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", text, _ACTIVITY_IMPORTANCE)]
    what = _activity(m)
    return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"The user has stopped {what}{_reason(s)}.",
                    _ACTIVITY_IMPORTANCE)]


def _taken_up(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I swim now", "I've taken up cycling", "现在改游泳了": the activity the user does instead."""
    if what := first_group(m, "zh"):
        return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"用户现在改为{what}。", _ACTIVITY_IMPORTANCE)]
    what = _activity(m)
    return [RuleHit("preference", "preference", f"user.preference.{slug(what)}", f"The user has taken up {what}.",
                    _ACTIVITY_IMPORTANCE)]


def _body(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"my knee surgery", "I hurt my back", "膝盖做了手术": a health constraint on that part of the body. An
    operation or an injury the user has stands; the moment one was got ("I sprained my ankle", "腰扭伤了")
    is of the moment, as a passing illness is: it is recalled when asked about, not on every request."""
    part = first_group(m, "part", "zhpart")
    if m.groupdict().get("zhpart"):
        surgery = "手术" in m.group()
        text = f"用户的{part}{'做过手术' if surgery else '受过伤'}。"
        return [RuleHit("entity", "health", f"user.health.{slug(part)}", text, _HEALTH_IMPORTANCE,
                        standing=None if surgery else False)]
    event = first_group(m, "event").lower()
    if event == "injury":
        text = f"The user has {'an' if part[0] in 'aeiouAEIOU' else 'a'} {part.lower()} injury."
    elif event:
        text = f"The user had {part.lower()} {event}."
    else:
        text = f"The user {m.group('hurt').lower()} their {part.lower()}."
    return [RuleHit("entity", "health", f"user.health.{slug(part)}", text, _HEALTH_IMPORTANCE,
                    standing=None if event else False)]


_ZH_STOPPED = rf"(?P<zh>{ZH_ACTIVITY})"

ACTIVITY_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(rf"\bI (?:don't|do not|can't|cannot) {_ACT} (?:anymore|any more)\b", re.I), _stopped),
    (re.compile(rf"\bI (?:no longer|can no longer) {_ACT}\b", re.I), _stopped),
    (re.compile(rf"\bI(?: have|'ve)? (?:stopped|quit|given up|gave up) {_GERUND}\b", re.I), _stopped),
    (re.compile(rf"我(?:现在|已经|早就)?(?:不再|再也不|不)(?:去)?{_ZH_STOPPED}了"), _stopped),
    (re.compile(rf"我(?:现在|已经)?(?:不再|再也不)(?:去)?{_ZH_STOPPED}"), _stopped),
    (re.compile(rf"我(?:已经)?(?:停止|放弃|戒)了?{_ZH_STOPPED}"), _stopped),
    (re.compile(rf"\bI (?:now |mostly |only )?{_ACT} (?:now|instead|these days)\b", re.I), _taken_up),
    (re.compile(rf"\bI(?:'ve| have)? (?:taken up|took up|started|switched to|picked up) {_GERUND}", re.I), _taken_up),
    (re.compile(rf"(?:现在|最近)我?(?:改成?|换成|开始|改为|转而)(?:去)?(?P<zh>{ZH_ACTIVITY})"), _taken_up),
    (re.compile(rf"\b(?:my|I(?: have| had|'ve had|'ve got)(?: an?)?) (?P<part>{BODY_PARTS}) "
                r"(?P<event>surgery|operation|replacement|injury)\b", re.I), _body),
    (re.compile(rf"\bI (?P<hurt>hurt|injured|broke|sprained|tore|dislocated) my (?P<part>{BODY_PARTS})\b", re.I), _body),
    (re.compile(rf"我?的?(?P<zhpart>{ZH_BODY_PARTS})(?:做了|动了|做过)?(?:手术|受伤了?|受过伤|骨折了?|扭伤了?)"), _body),
]
