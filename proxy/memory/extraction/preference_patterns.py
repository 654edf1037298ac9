"""The rule-based extractor's patterns for how the user wants to be served: budgets and contact channels.

A budget ("My budget for the trip is 2,000 euros", "I can spend up to $500
on a phone", "我的预算是五千块": ``user.budget`` or ``user.budget.<what>``)
and the channel the user wants to be reached by ("Please only contact me by
email", "Don't call me", "请只用邮件联系我": ``user.contact.channel``,
``user.contact.not.<channel>``): preferences that shape every offer and
every follow-up, so they stand in the profile. One slot each, so a new
budget or channel supersedes the old. Said for now ("my budget for dinner
tonight") they are of the moment (``rules``). English and Chinese, the
user's own statements only.
"""

from __future__ import annotations

import re
from datetime import datetime

from .rule_patterns import Rule, RuleHit, chinese, first_group, lasting, slug

_NUMBER_WORDS = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty"
                 r"|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|grand|a|and|-)")


def _amount(group: str) -> str:
    """An amount, as ``group``: a currency sign and digits, digits and a currency or a multiplier, or
    number words and a currency ("$500", "2,000 euros", "15k", "fifteen thousand pounds")."""
    return (rf"(?P<{group}>(?:[$€£¥]\s?\d[\d,.]*\s?(?:k|K|thousand|grand)?"
            r"|\d[\d,.]*\s?(?:k|K)?\s?(?:euros?|dollars?|pounds?|bucks|quid|usd|eur|gbp|yuan|rmb|yen|francs?"
            r"|thousand|grand)"
            rf"|(?:{_NUMBER_WORDS}[ -]){{1,5}}(?:euros?|dollars?|pounds?|bucks|quid|yuan|yen|grand|thousand)))")


_ZH_AMOUNT = r"(?P<amount>[\d一二三四五六七八九十百千万两.,]+(?:块钱|块|元|万元|万|千元|千|美元|欧元|英镑|美金)?)"
_CHANNELS = r"e-?mail|text(?: message)?s?|sms|phone|whatsapp|telegram|signal|wechat|post|letter|messenger|slack"
_ZH_CHANNELS = "邮件|邮箱|电子邮件|短信|微信|电话|WhatsApp|Telegram"


def _budget(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"My budget for the trip is 2,000 euros", "I can spend up to $500 on a phone", "我的预算是五千块"."""
    amount = " ".join(first_group(m, "amount", "amount2").split()).rstrip(".,")
    what = " ".join(first_group(m, "what", "what2").split())
    key = f"user.budget.{slug(what)}" if what else "user.budget"
    if chinese(m.group()):
        return [RuleHit("constraint", "preference", key, f"用户的预算是{amount}。", 0.7)]
    text = f"The user's budget for the {what} is {amount}." if what else f"The user's budget is {amount}."
    return [RuleHit("constraint", "preference", key, text, 0.7)]


@lasting
def _channel(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    channel = m.group("ch").lower()
    if chinese(m.group()):
        return [RuleHit("preference", "preference", "user.contact.channel", f"用户希望通过{channel}联系。", 0.7)]
    return [RuleHit("preference", "preference", "user.contact.channel",
                    f"The user wants to be contacted by {channel}.", 0.7)]


@lasting
def _not_by(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"Don't call me", "I don't take phone calls", "别给我打电话": no calls."""
    if chinese(m.group()):
        return [RuleHit("preference", "preference", "user.contact.not.phone", "用户不希望接到电话。", 0.7)]
    return [RuleHit("preference", "preference", "user.contact.not.phone", "The user does not want phone calls.", 0.7)]


PREFERENCE_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(r"\b(?i:my|our) (?i:total |overall |max(?:imum)? )?(?i:budget)(?: (?i:for|on) (?:(?i:the|a|my|our) )?"
                r"(?P<what>[a-z][a-z ]{1,30}?))? (?i:is|was|will be) (?i:(?:about|around|roughly|up to|at most"
                r"|under|below|no more than|max|maximum|only) )?" + _amount("amount")),
     _budget),
    (re.compile(r"\bI (?i:can|could) (?i:only |just )?(?i:spend|afford) (?i:(?:up to|at most|no more than|about"
                r"|around|maybe) )?" + _amount("amount") + r"(?: (?i:on|for) (?:(?i:the|a|an|my) )?(?P<what2>[a-z][a-z ]{1,30}?))?"
                r"(?=$|[.,;!?]| (?:and|but|so|tops|max)\b)"
                r"|\bI (?i:don't|do not|can't|cannot) (?i:want to )?(?i:spend|pay) (?i:more than|over) " + _amount("amount2")),
     _budget),
    (re.compile(r"我(?:们)?的?(?:总)?预算(?:是|有|大概是?|大约是?|在|为|只有)" + _ZH_AMOUNT), _budget),
    (re.compile(r"我最多(?:只)?(?:能|可以)?花" + _ZH_AMOUNT), _budget),
    (re.compile(r"\b(?i:(?:please )?(?:only )?(?:contact|reach|message|get in touch with|get hold of) me (?:only )?"
                rf"(?:by|via|on|through|over)) (?P<ch>{_CHANNELS})\b", re.I), _channel),
    (re.compile(rf"\b(?P<ch>{_CHANNELS}) is (?:the )?(?:best|easiest|only) (?:way )?(?:to reach me|to contact me"
                r"|for me)\b", re.I), _channel),
    # Not "Don't call me Robert" (a name): the request ends at "me" or goes on with when.
    (re.compile(r"\b(?:please )?(?:don't|do not|never) (?:call|phone|ring) me(?=$|[.,;!?]| (?:on|at|during|after"
                r"|before|again|any ?more|please)\b)|\bI (?:don't|do not) (?:take|answer|pick up) (?:phone )?calls\b",
                re.I), _not_by),
    (re.compile(rf"请?(?:只|尽量)?(?:用|通过)(?P<ch>{_ZH_CHANNELS})(?:和我)?联系我?"), _channel),
    (re.compile(r"(?:别|不要|请勿)(?:给我)?打电话"), _not_by),
]

