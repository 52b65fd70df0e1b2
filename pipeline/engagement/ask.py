"""4. What it says: the ask, from a fixed template. Pure.

A template cannot time out, cost money or invent a name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from contracts.engagement import Target
from contracts.work import WorkReport
from pipeline.engagement.values import plain, text
from pipeline.engagement.work import Work

_BLANK_RUNS = re.compile(r"\n{3,}")

_HEADS = {
    "blocked_on_other": "**Blocked:** {title}",
    "irreversible_or_external": "**Needs your go-ahead:** {title}",
    "mandatory_review": "**Ready for review:** {title}",
    "commitment_at_risk": "**Heads-up on {title}**",
}
_ASKS = {
    "blocked_on_other": "I can't clear this myself.",
    "irreversible_or_external": "I'm not taking this step without a yes — it can't be undone.",
    "mandatory_review": "It needs your sign-off before it lands.",
    "commitment_at_risk": "You asked for this and it isn't going to land as promised, so "
    "you're hearing it from me rather than finding out.",
}


def compose(w: Work, trigger: str, detail: str, names: Sequence[str]) -> str:
    """The ask for `trigger` (a trigger name), where it stopped (`detail`), to `names`.

    Order: headline, summary, where it stopped, what was tried (at most 5), the ask line,
    then the single question (with options when there are at least two) and the link last.
    """
    title = (w.title or w.id_text or "this piece of work").strip()
    head = _HEADS.get(trigger)
    if w.headline:
        first = f"**{w.headline}**"
    else:
        first = head.format(title=title) if head else f"**{title}**"
    lines = [first, ""]
    if w.summary:
        lines.append(w.summary.strip())
    if detail:
        lines.append(f"Where it stopped: {detail.strip()}")
    if w.tried:
        lines += ["", "What I've already tried:"]
        lines += [f"- {t.strip()}" for t in w.tried[:5]]
    lines += ["", _ASKS.get(trigger, "")]
    if w.question:
        lines += ["", w.question]
        if len(w.options) >= 2:
            lines += [f"- {o}" for o in w.options[:5]]
    elif names:
        lines += ["", "@" + " @".join(names) + " — what would you like me to do?"]
    if w.link:
        lines += ["", w.link]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _name(t: Target | Mapping[str, object] | object) -> str:
    if isinstance(t, Target):
        return t.name
    m = plain(t)
    return text(m.get("name")) if isinstance(m, Mapping) else ""


def compose_ask(
    work: WorkReport | Mapping[str, object] | object = None,
    trigger: Mapping[str, object] | None = None,
    targets: Sequence[Target | Mapping[str, object]] = (),
    surface: str | None = None,
) -> str:
    """The ask, from a fixed template: a template cannot time out, cost money or invent a name.

    Order: headline, summary, where it stopped, what was tried (at most 5), the ask line,
    then the single question (with options when there are at least two) and the link last.
    `surface` is accepted for callers that pass it; the words do not depend on it.
    """
    trig = trigger or {}
    names = [_name(t) for t in targets]
    return compose(Work.of(work), text(trig.get("trigger")), text(trig.get("detail")), names)
