"""What the rules know of activities and the body: verbs to their gerund, and the slot names they share.

A sport or habit has one slot whatever the phrasing ("I run", "running",
"跑步" → ``running``), so that giving it up later ("I don't run anymore",
"我不跑步了") names the slot its liking holds. A body part has one slot in
both languages (knee, 膝盖 → ``knee``) for what happened to it. Pure data and
one function; ``rule_patterns.slug`` reads ``CANON``.
"""

from __future__ import annotations

# Verbs of sports, exercise and pastimes a user takes up or gives up. "play",
# "do", "practice" and "go" take their activity as an object (``gerund``).
VERBS = ("run|jog|swim|cycle|bike|ride|hike|ski|snowboard|climb|dance|surf|row|box|skate|golf|fish|hunt"
         "|work out|exercise|lift weights|smoke|drive|paint|draw|sing|cook|bake|knit|garden|meditate")
OBJECT_VERBS = "play|do|practice|practise|go"
_DOUBLED = frozenset({"run", "jog", "swim"})

# Chinese names of activities and body parts → the English slot both languages share.
_ZH_ACTIVITIES = {
    "running": "跑步|跑|慢跑|长跑", "running_marathon": "跑马拉松|马拉松", "swimming": "游泳",
    "cycling": "骑车|骑自行车|骑行", "hiking": "爬山|徒步", "skiing": "滑雪", "climbing": "攀岩",
    "dancing": "跳舞", "working_out": "健身", "yoga": "瑜伽|练瑜伽|做瑜伽", "smoking": "抽烟|吸烟",
    "playing_tennis": "打网球", "playing_basketball": "打篮球", "playing_football": "踢足球|踢球",
    "playing_badminton": "打羽毛球",
}
ZH_ACTIVITY = "|".join(sorted((a for names in _ZH_ACTIVITIES.values() for a in names.split("|")), key=len, reverse=True))
_BODY = {
    "knee": "膝盖|膝", "hip": "髋|髋关节", "back": "腰|背|腰椎", "shoulder": "肩膀|肩", "ankle": "脚踝",
    "wrist": "手腕", "elbow": "手肘|肘", "neck": "脖子|颈椎", "heart": "心脏", "foot": "脚", "leg": "腿",
    "arm": "胳膊|手臂", "hand": "手", "eye": "眼睛",
}
BODY_PARTS = "|".join(_BODY)
ZH_BODY_PARTS = "|".join(sorted((p for names in _BODY.values() for p in names.split("|")), key=len, reverse=True))
CANON = {alias: slot for table in (_ZH_ACTIVITIES, _BODY) for slot, aliases in table.items() for alias in aliases.split("|")}


def gerund(verb: str, thing: str = "") -> str:
    """The activity a verb names: "run" → "running", "play" + "tennis" → "playing tennis", "do" + "yoga" → "yoga"."""
    words = verb.lower().split()
    head = words[0]
    if head in ("do", "practice", "practise", "go") and thing:
        return thing.lower()
    if head in _DOUBLED:
        ing = head + head[-1] + "ing"
    elif head.endswith("e") and not head.endswith(("ee", "ye")) and head != "ski":
        ing = head[:-1] + "ing"
    else:
        ing = head + "ing"
    return " ".join([ing, *words[1:], *([thing.lower()] if thing else [])])
