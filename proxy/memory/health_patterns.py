"""The rule-based extractor's health and diet patterns: what a user says about their body and food.

A diet (vegetarian, vegan, 吃素), a pregnancy, a condition (diabetes, celiac
disease, 糖尿病), an intolerance, a wheelchair: standing facts that change
every food, drink or travel answer, which the profile shows on every request.
English and Chinese, the user's own statements only ("my sister is vegan" is
not about the user). Keys: ``user.diet``, ``user.health.<slot>``.
"""

from __future__ import annotations

import re
from datetime import datetime

from .rule_patterns import Rule, RuleHit, slug

_DIETS = r"vegetarian|vegan|pescatarian|pescetarian|plant-based|kosher|halal"
_ADVERBS = r"(?:(?:now|strictly|fully|completely|been|always|mostly|a|an|totally)\s+){0,3}"
_CONDITIONS = (r"(?:type [12] )?diabetes|c(?:o)?eliac disease|asthma|epilepsy|high blood pressure|hypertension"
               r"|a heart condition|IBS|gout|lactose intolerance|kidney disease")
_STATES = r"lactose intolerant|gluten intolerant|diabetic|c(?:o)?eliac|asthmatic|epileptic"
_ZH_CONDITIONS = "糖尿病|高血压|哮喘|癫痫|心脏病|乳糖不耐受|痛风"
_HEALTH_IMPORTANCE = 0.9


def _diet(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    if m.groupdict().get("diet"):
        return [RuleHit("entity", "user.diet", f"The user is {m.group('diet').lower()}.", _HEALTH_IMPORTANCE)]
    return [RuleHit("entity", "user.diet", f"用户吃素：“{m.group()}”。", _HEALTH_IMPORTANCE)]


def _pregnancy(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    zh = re.search(r"[\u4e00-\u9fff]", m.group())
    text = "用户怀孕了。" if zh else "The user is pregnant."
    return [RuleHit("entity", "user.health.pregnancy", text, _HEALTH_IMPORTANCE)]


def _condition(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    what = m.group("what")
    if re.search(r"[\u4e00-\u9fff]", what):
        return [RuleHit("entity", f"user.health.{slug(what)}", f"用户有{what}。", _HEALTH_IMPORTANCE)]
    verb = "is" if re.fullmatch(_STATES, what, re.I) else "has"
    return [RuleHit("entity", f"user.health.{slug(what)}", f"The user {verb} {what}.", _HEALTH_IMPORTANCE)]


def _mobility(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    return [RuleHit("entity", "user.health.mobility", "The user uses a wheelchair.", _HEALTH_IMPORTANCE)]


HEALTH_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(r"\bI(?:'m| am|'ve been| have been| went| became| turned| have gone| eat)\s+"
                + _ADVERBS + f"(?P<diet>{_DIETS})\\b", re.I), _diet),
    (re.compile(r"我(?:已经|一直|现在)?(?:吃素|吃全素|只吃素|是(?:严格的|纯)?素食(?:者|主义者)?)"), _diet),
    (re.compile(r"\bI(?:'m| am)\s+(?:\w+\s+){0,2}pregnant\b", re.I), _pregnancy),
    (re.compile(r"我(?:已经|正在)?怀孕"), _pregnancy),
    (re.compile(r"\bI (?:have|'ve got|was diagnosed with|suffer from|live with) "
                f"(?P<what>{_CONDITIONS})\\b", re.I), _condition),
    (re.compile(r"\bI(?:'m| am)\s+(?:(?:severely|very|quite)\s+)?" f"(?P<what>{_STATES})\\b", re.I), _condition),
    (re.compile(f"我(?:有|患有|得了|是)?(?P<what>{_ZH_CONDITIONS})"), _condition),
    (re.compile(r"\bI (?:use|am in|'m in) a wheelchair\b", re.I), _mobility),
]
