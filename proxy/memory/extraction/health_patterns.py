"""The rule-based extractor's health and diet patterns: what a user says about their body and food.

A diet (vegetarian, vegan, kosher, 吃素) and its end ("I'm no longer vegan"),
a pregnancy ("I'm expecting a baby"), a condition (diabetes, celiac disease,
糖尿病), an intolerance, a medication (warfarin, insulin, 降压药), something
the user or someone in their care cannot eat ("our dog can't eat chicken"),
an allergy said with "have" ("Our dog has a severe allergy to beef"), a
wheelchair: standing facts that change every food, drink or travel answer,
which the profile shows on every request. English and Chinese, the user's own
statements only ("my sister is vegan" is not about the user). Keys:
``user.diet``, ``user.health.<slot>``, ``<holder>.diet.<thing>``,
``<holder>.allergy.<thing>``.
"""

from __future__ import annotations

import re
from datetime import datetime

from ..memory_schema import USER, Category
from .rule_patterns import (
    CARE,
    NOT_A_FOOD,
    ZH_CARE,
    Rule,
    RuleHit,
    allergy,
    chinese,
    clause,
    first_group,
    lasting,
    listed,
    slug,
    third_person_object,
    whose,
)

_DIETS = r"vegetarian|vegan|pescatarian|pescetarian|plant-based|kosher|halal"
_ADVERBS = r"(?:(?:now|strictly|strict|fully|completely|been|always|mostly|a|an|totally)\s+){0,3}"
_DIET_TEXT = {"kosher": "The user keeps kosher.", "halal": "The user eats only halal food.",
              "plant-based": "The user eats a plant-based diet."}
# The verbs a diet is kept with: "I keep kosher", "I only eat halal", "I'm on a vegan diet".
_DIET_VERBS = (r"'m| am|'ve been| have been| went| became| turned| have gone| eat| only eat| eat only| keep"
               r"| follow| stick to|'m on| am on")
_MEDICATIONS = (r"blood thinners|anticoagulants|warfarin|coumadin|eliquis|xarelto|insulin|metformin"
                r"|antidepressants|ssris|sertraline|prozac|fluoxetine|lithium|maois|statins|beta[- ]blockers"
                r"|chemotherapy|chemo|methotrexate|isotretinoin|accutane|immunosuppressants|prednisone|steroids"
                r"|blood pressure (?:medication|meds|pills|tablets)|heart medication|seizure medication")
_ZH_MEDICATIONS = "华法林|抗凝药|胰岛素|二甲双胍|降压药|抗抑郁药|锂盐|化疗药|激素|抗癫痫药|免疫抑制剂"
# Where the food ends: "pork for religious reasons", "alcohol while on these pills".
_FOOD_END = re.compile(r"\s+(?:for|while|during|at|on|with|until|after|before|any ?more|these days|now|anyway"
                       r"|either|at all)\b.*|(?:因为|由于|所以).*", re.I)
_CONDITIONS = (r"(?:type [12] )?diabetes|c(?:o)?eliac disease|asthma|epilepsy|high blood pressure|hypertension"
               r"|a heart condition|IBS|gout|lactose intolerance|kidney disease")
_STATES = r"lactose intolerant|gluten intolerant|diabetic|c(?:o)?eliac|asthmatic|epileptic"
_STATE = rf"(?:type [12] )?(?:{_STATES})"
_ZH_CONDITIONS = "糖尿病|高血压|哮喘|癫痫|心脏病|乳糖不耐受|痛风"
_HEALTH_IMPORTANCE = 0.9
# The aids a user moves with: the category's own vocabulary, not a brand.
_AIDS = (r"(?:electric |powered |manual )?wheelchair|power chair|powerchair|mobility scooter|walker|rollator"
         r"|walking frame|zimmer frame|cane|walking stick|crutches|prosthetic leg|prosthesis")
_ZH_AIDS = "电动轮椅|轮椅|助行器|拐杖|拐棍|手杖|假肢"
# How a medicine is taken: its dose count or its reason ("twice a day", "for my heart"). Not "every day",
# which a routine has too ("I take Pilates every morning").
_DOSING = r"twice a day|once a day|(?:two|three|four) times a day|for my [a-z]+(?: [a-z]+)?"
# What a medicine comes as: "I take my thyroid pills every morning".
_FORMS = r"pills?|tablets?|capsules?|medication|medicine|meds|injections?|inhaler|drops|patches"
# What else is "taken" on a schedule: not a medicine.
_NOT_A_MEDICINE = frozenset({"walks", "walk", "naps", "nap", "breaks", "break", "showers", "shower", "baths", "bath",
                             "notes", "photos", "pictures", "classes", "lessons", "turns", "time", "care", "calls",
                             "orders", "risks", "steps", "selfies", "trains", "buses", "taxis", "lunch", "dinner",
                             "breakfast", "coffee", "tea", "the", "my", "our", "some", "them", "it", "this", "that"})
# Illnesses that pass: a diagnosis of one is of the moment, whatever its name's form.
_ACUTE = frozenset({"flu", "the flu", "a cold", "cold", "covid", "covid-19", "a virus", "an infection", "fever",
                    "a fever", "food poisoning", "strep", "strep throat", "pneumonia", "a chest infection",
                    "tonsillitis", "conjunctivitis", "gastroenteritis", "a stomach bug", "norovirus", "chickenpox",
                    "measles", "mumps", "laryngitis", "sinusitis", "a sprain", "a concussion", "jet lag"})
# What "I suffer from" is said of that is no condition ("stress at work", "a lack of sleep").
_NOT_A_CONDITION = frozenset({*NOT_A_FOOD, "stress", "boredom", "jet", "lack", "nerves", "fomo", "guilt", "it",
                              "some", "bad", "terrible", "awful", "serious", "severe", "my", "our", "his", "her",
                              "their", "your", "people", "being", "having", "too"})
# Where a condition's name ends: a time or a place ("diabetes since last year", "pain at work").
_WHEN = re.compile(r"\s+(?:yesterday|today|last|this|since|in|at|after|a (?:few|couple of)|\d+|when|while|from"
                   r"|for)\b.*", re.I)
# Named as a condition is named: by its suffix or its head noun.
_CONDITION_FORM = (r"(?:[a-z]+ )?[a-z]+(?:itis|osis|emia|aemia|pathy|algia)"
                   r"|(?:[a-z']+ ){0,2}(?:disease|syndrome|disorder)")


def _diet(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    if diet := first_group(m, "diet").lower():
        text = _DIET_TEXT.get(diet, f"The user is {diet}.")
        return [RuleHit("entity", "health", "user.diet", text, _HEALTH_IMPORTANCE)]
    return [RuleHit("entity", "health", "user.diet", f"用户吃素：“{m.group()}”。", _HEALTH_IMPORTANCE)]


def _diet_ended(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I'm no longer vegetarian", "I eat meat again", "我不吃素了": the diet's slot, ended."""
    if chinese(m.group()):
        return [RuleHit("entity", "health", "user.diet", "用户不再吃素了。", _HEALTH_IMPORTANCE)]
    diet = first_group(m, "diet", "diet2", "diet3").lower()
    text = f"The user is no longer {diet}." if diet else "The user eats meat again."
    return [RuleHit("entity", "health", "user.diet", text, _HEALTH_IMPORTANCE)]


def _medication(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    what = m.group("what")
    if chinese(what):
        return [RuleHit("entity", "health", f"user.health.medication.{slug(what)}", f"用户在服用{what}。", _HEALTH_IMPORTANCE)]
    return [RuleHit("entity", "health", f"user.health.medication.{slug(what)}", f"The user takes {what.lower()}.",
                    _HEALTH_IMPORTANCE)]


def _cannot_eat(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I can't eat pork", "Our dog can't have chicken", "我的猫不能吃鸡肉": foods the holder must avoid."""
    who = (m.groupdict().get("who") or "").strip()
    holder = f"user.{slug(who)}" if who else "user"
    verb = m.group("verb")
    zh = chinese(m.group())
    subject = (f"用户的{who}" if who else "用户") if zh else (f"The user's {who}" if who else "The user")
    category: Category = "relationship" if who else "health"
    about = whose(who, zh) if who else USER
    return [RuleHit("constraint", category, f"{holder}.diet.{slug(what)}",
                    f"{subject}不能{verb}{what}。" if zh else f"{subject} can't {verb.lower()} {what}.",
                    _HEALTH_IMPORTANCE, about)
            for what in _foods(m.group("what"))]


def _foods(said: str) -> list[str]:
    """The foods of "pork for religious reasons", "dairy or eggs": none for "another bite" or "tonight"."""
    out = []
    for what in (_FOOD_END.split(w)[0].strip() for w in listed(said)):
        if not what or what.split(" ", 1)[0].lower() in NOT_A_FOOD or len(what.split()) > 3:
            break
        out.append(what)
    return out


def _pregnancy(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    zh = chinese(m.group())
    text = "用户怀孕了。" if zh else "The user is pregnant."
    return [RuleHit("entity", "health", "user.health.pregnancy", text, _HEALTH_IMPORTANCE)]


def _condition(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    what = first_group(m, "what", "what2")
    if chinese(what):
        return [RuleHit("entity", "health", f"user.health.{slug(what)}", f"用户有{what}。", _HEALTH_IMPORTANCE)]
    verb = "is" if re.fullmatch(_STATE, what, re.I) else "has"
    return [RuleHit("entity", "health", f"user.health.{slug(what)}", f"The user {verb} {what}.", _HEALTH_IMPORTANCE)]


@lasting
def _mobility(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I use a wheelchair", "I get around with a walker", "我坐轮椅": the aid the user moves with."""
    aid = " ".join(first_group(m, "aid", "aid2").lower().split())
    if chinese(aid):
        return [RuleHit("entity", "health", "user.health.mobility", f"用户使用{aid}。", _HEALTH_IMPORTANCE)]
    article = "" if aid == "crutches" else "an " if aid[0] in "aeiou" else "a "
    return [RuleHit("entity", "health", "user.health.mobility", f"The user uses {article}{aid}.", _HEALTH_IMPORTANCE)]


@lasting
def _mobility_limit(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I can't manage stairs", "I can't walk far", "我爬不了楼梯": what the user's body cannot do."""
    said = m.group().rstrip("。，,.!！")
    if chinese(said):
        return [RuleHit("constraint", "health", "user.health.mobility.limit", f"用户说：“{said}”。", _HEALTH_IMPORTANCE)]
    limit = re.sub(r"^I\s+", "", said, flags=re.I)
    return [RuleHit("constraint", "health", "user.health.mobility.limit", f"The user {third_person_object(limit)}.",
                    _HEALTH_IMPORTANCE)]


@lasting
def _senses(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """"I'm hard of hearing", "I wear hearing aids", "I'm partially sighted", "我听力不好": hearing and sight."""
    said = m.group()
    sense = "vision" if re.search(r"blind|sight|vision|visual|see|视|看|盲", said, re.I) else "hearing"
    if chinese(said):
        return [RuleHit("entity", "health", f"user.health.{sense}", f"用户说：“{said}”。", _HEALTH_IMPORTANCE)]
    state = re.sub(r"^I(?:'m| am)\s+", "is ", said, flags=re.I)
    state = re.sub(r"^I (wear|use|have)\b", lambda v: {"wear": "wears", "use": "uses", "have": "has"}[v.group(1).lower()],
                   state, flags=re.I)
    return [RuleHit("entity", "health", f"user.health.{sense}", f"The user {third_person_object(state)}.",
                    _HEALTH_IMPORTANCE)]


@lasting
def _prescribed(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """A medicine told by how it is taken, whatever its name: "I was prescribed X", "I take X twice a
    day", "I'm on X for my heart", "I take my X pills", "我长期服用X"."""
    what = first_group(m, "what", "what2", "what3").strip()
    if chinese(what):
        return [RuleHit("entity", "health", f"user.health.medication.{slug(what)}", f"用户在服用{what}。",
                        _HEALTH_IMPORTANCE)]
    if what.lower() in _NOT_A_MEDICINE or len(what) < 4:
        return []
    taken = f"{what} {m.group('form').lower()}" if m.groupdict().get("form") else what
    return [RuleHit("entity", "health", f"user.health.medication.{slug(what)}", f"The user takes {taken}.",
                    _HEALTH_IMPORTANCE)]


@lasting
def _diagnosed(m: re.Match[str], s: str, now: datetime) -> list[RuleHit]:
    """A condition told by how it is said, whatever its name: "I was diagnosed with X", "I suffer from
    X", "I have X" when X is named as a condition is ("…itis", "… disease", "… syndrome")."""
    what = _WHEN.split(clause(first_group(m, "what", "what2", "what3")))[0].strip()
    if not what or len(what.split()) > 4 or what.split()[0].lower() in _NOT_A_CONDITION or what.lower() in _ACUTE:
        return []
    return [RuleHit("entity", "health", f"user.health.{slug(what)}", f"The user has {what}.", _HEALTH_IMPORTANCE)]


HEALTH_RULES: list[tuple[re.Pattern[str], Rule]] = [
    (re.compile(rf"\bI(?:'m| am) no longer (?:a |an |strictly )?(?P<diet>{_DIETS})"
                rf"|\bI(?:'m| am) not (?:a |an )?(?P<diet3>{_DIETS}) any ?more"
                rf"|\bI(?:'ve| have)? (?:stopped|quit|given up|gave up) being (?:a |an )?(?P<diet2>{_DIETS})"
                r"|\bI(?:'ve| have)? (?:started|begun) eating meat again|\bI eat meat again", re.I), _diet_ended),
    (re.compile(r"我(?:已经|现在)?(?:不再吃素|不吃素了|开始吃肉了)"), _diet_ended),
    (re.compile(rf"\bI(?:{_DIET_VERBS})\s+" + _ADVERBS + f"(?P<diet>{_DIETS})\\b", re.I), _diet),
    # A household's diet is the user's too ("We keep kosher", "Our family is vegetarian"), said of the diet
    # itself, not of something "we" run or sell ("We're a vegan bakery").
    (re.compile(r"\b(?:[Ww]e|[Oo]ur (?:family|household|home))"
                rf"(?:{_DIET_VERBS}|'re| are| keeps| eats| follows| is| has been)\s+" + _ADVERBS
                + f"(?P<diet>{_DIETS})" + r"(?=$|[.,;:!?)—–]| (?:and|so|but|since|now|too|at home)\b)", re.I),
     _diet),
    (re.compile(r"我(?:已经|一直|现在)?(?:吃素|吃全素|只吃素|是(?:严格的|纯)?素食(?:者|主义者)?)"), _diet),
    (re.compile(r"\bI(?:'m| am)\s+(?:\w+\s+){0,2}pregnant\b"
                r"|\bI(?:'m| am) expecting (?:a baby|a child|twins|a boy|a girl|(?:my|our) (?:first|second|third)"
                r"(?: child| baby)?)\b", re.I), _pregnancy),
    (re.compile(r"我(?:已经|正在)?(?:怀孕|怀了|有了?身孕)"), _pregnancy),
    (re.compile(r"\bI(?: take| am taking|'m taking|'m on| am on| have to take| need to take| inject| use)\s+"
                rf"(?:(?:daily|regular|prescription|prescribed)\s+)?(?P<what>{_MEDICATIONS})\b", re.I), _medication),
    (re.compile(f"我(?:每天|一直|正在|在|长期)?(?:吃|服用|服|打|注射|用)(?P<what>{_ZH_MEDICATIONS})"), _medication),
    (re.compile(r"\b(?:I|(?:my|our) (?P<who>" + CARE + r")) (?:can't|cannot|can not|mustn't|must not|shouldn't)"
                r" (?:ever )?(?P<verb>eat|have|drink) (?P<what>[^.,;!?\n]+)", re.I), _cannot_eat),
    (re.compile(r"我(?:的|家)?(?P<who>" + ZH_CARE + r")?(?:不能|不可以|不许)(?P<verb>吃|喝)"
                r"(?P<what>[^，。！？,.!?；;\s]{1,8}?)(?=$|[，。！？,.!?；;\s]|的东西)"), _cannot_eat),
    (re.compile(r"\b(?:I|(?:my|our) (?P<who>" + CARE + r")) (?:has|have|'ve got|has got) an? "
                r"(?:(?:severe|mild|bad|serious|slight|known|life-threatening|food)\s+){0,2}allerg(?:y|ies) to "
                r"(?P<what>[^.;!?\n]+)", re.I), allergy),
    (re.compile(r"\b(?:my|our) (?P<who>" + CARE + r") (?:has|has got) an? (?:(?:severe|mild|bad|serious)\s+)?"
                r"(?P<what>[\w ]{2,30}?) allerg(?:y|ies)\b", re.I), allergy),
    (re.compile(r"\bI (?:have|'ve got|was diagnosed with|suffer from|live with) "
                f"(?P<what>{_CONDITIONS})\\b", re.I), _condition),
    (re.compile(r"\bI(?:'m| am)\s+(?:(?:severely|very|quite)\s+)?" f"(?P<what>{_STATE})\\b", re.I), _condition),
    # "Being coeliac, I…", "As a diabetic I…", "…useless for me being coeliac": the state the sentence's "I" (or
    # the "me" it follows) is in; not a gerund the sentence talks about ("Being coeliac is hard"), nor with
    # someone else in the sentence ("As a diabetic, he…").
    (re.compile(r"(?:^|[,;:(—–]\s*)(?i:being|as an?) " f"(?P<what>{_STATE})"
                r"(?![\w-])(?!\s+(?:is|was|isn't|can be|must be)\b)(?=[^.!?]*\bI\b)"
                r"(?![^.!?]*\b(?i:he|she|they|his|her|him|their)\b)"
                r"|\b(?i:me),? (?i:being) " f"(?P<what2>{_STATE})" r"(?![\w-])"), _condition),
    (re.compile(f"我(?:有|患有|得了|是)?(?P<what>{_ZH_CONDITIONS})"), _condition),
    (re.compile(r"\bI (?:use|am in|'m in|need|rely on|get around (?:in|on|with)|walk with|depend on)"
                rf" (?:an? )?(?:(?:folding|new|old) )?(?P<aid>{_AIDS})\b"
                # "…get my wheelchair over the lip": the aid the user owns is the one they move with.
                rf"|\bmy (?:(?:own|folding|new|old) )?(?P<aid2>{_AIDS})(?![\w'-])", re.I), _mobility),
    (re.compile(f"我(?:一直|现在|出门|平时)?(?:要|得|需要)?(?:坐|用|拄|靠|使用)(?:着)?(?P<aid>{_ZH_AIDS})"), _mobility),
    (re.compile(r"\bI (?:can't|cannot|can not|am unable to|'m unable to) (?:manage|climb|do|use|take|handle|walk up)"
                r" (?:the )?(?:stairs|steps|staircases)\b"
                r"|\bI (?:can't|cannot|can not) (?:walk|stand) (?:far|for long|long distances|very far|much)\b",
                re.I), _mobility_limit),
    (re.compile(r"我(?:爬不了|上不了|不能爬|没法爬|没法上|不能上)楼梯|我(?:走不了|不能走)(?:远路|太远|很远)"), _mobility_limit),
    (re.compile(r"\bI(?:'m| am) (?:(?:completely|partially|totally|profoundly|legally|a bit|slightly) )?(?:deaf|blind"
                r"|hard of hearing|partially sighted|visually impaired|hearing impaired)(?: in (?:one|my (?:left|right)) ear)?"
                r"(?=$|[.,;!?]| (?:and|so|but|since|from|now|too)\b)"
                r"|\bI (?:wear|use|have) (?:a )?hearing aids?\b"
                r"|\bI have (?:a |some )?(?:hearing|sight|vision) (?:loss|impairment|problems)\b", re.I), _senses),
    (re.compile(r"我(?:是)?(?:聋人|听障|盲人|视障)|我(?:的)?听力(?:不好|不太好|很差|有问题|受损|下降)"
                r"|我(?:戴|用)(?:着)?助听器|我(?:的)?视力(?:不好|很差|有问题)"), _senses),
    (re.compile(r"\bI(?:'ve| have| was| am|'m| got)? (?:been )?prescribed (?P<what>[A-Za-z][a-z-]{3,})\b"
                rf"|\bI(?: take| am on|'m on) (?P<what2>[A-Za-z][a-z-]{{3,}}) (?:{_DOSING})\b"
                rf"|\bI take (?:my )?(?P<what3>[A-Za-z][a-z-]{{3,}}) (?P<form>{_FORMS})\b", re.I), _prescribed),
    # 服用 is said of medicine only (吃 of food too).
    (re.compile(r"我(?:每天|长期|一直|正在|在)?服用(?P<what>[\u4e00-\u9fffA-Za-z]{2,8}?)(?=$|[，。！？,.!?；;\s])"),
     _prescribed),
    (re.compile(r"\bI(?:'ve| have| was| am|'m| got)? (?:been )?diagnosed with (?P<what>[^.,;!?\n]+)"
                r"|\bI suffer from (?P<what2>[^.,;!?\n]+)"
                rf"|\bI (?:have|'ve got) (?:an? )?(?P<what3>{_CONDITION_FORM})\b", re.I), _diagnosed),
]
