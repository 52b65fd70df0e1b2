"""Replies that answer an ask, found among the inbound events the directedness stage records:
a Slack message in the thread of an ask, or a GitHub comment or review on the issue or pull
request an ask is about, by a person the ask asked, written after it landed.

The event still reaches the seats as any other (its verdicts are the directedness stage's);
the answer is a side effect, recorded through `Answers` like every answer (once, with the
seat's inbox item), just before the stage records the event (so that a worker killed between
the two leaves the event's entry open, for the sweeper to deliver again: see
workers/stages/directedness.py). A failure here is logged and never fails the event. A
redelivery of an event that already answered its ask answers nothing again
(`AskStore.reply_answered`), and one that died between the answer and that marker brings the
same answer again (its key is the delivery id), not a late one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis

from contracts.asks import AnswerKind, AnswerVia, Ask
from contracts.inbound import Candidate
from pipeline import decisions as rules
from pipeline.asks import AnswerIn, github_answer, item_id_of, reply_refusal
from workers.container import Container
from workers.recovery.faults import crash_point
from workers.stages.answers import Answers
from workers.stores.asks import AskContended

log = logging.getLogger("seatwire.asks")

MAX_ITEM_ASKS = 20  # open asks about one issue or pull request a reply is matched against


@dataclass(frozen=True)
class Reply:
    """One reply as an answer: what it says, by whom, written when, and to which asks."""

    answer: AnswerKind
    via: AnswerVia
    author_id: str
    text: str
    written_ms: int
    asks: tuple[Ask, ...]


def answer_by_reply(c: Container, candidate: Candidate, *, now_ms: int) -> list[str]:
    """Answer every ask `candidate` is a reply to; what became of each, as `askId:outcome`
    (empty when the event is no reply to an ask). Never raises."""
    try:
        reply = _reply_of(c, candidate, now_ms=now_ms)
        if reply is None or not reply.asks:
            return []
        if c.asks.reply_answered(candidate.delivery_id):
            return [f"{a.id}:redelivered" for a in reply.asks]
        view, _degraded = c.org.current()
        person, refused = rules.person_of(
            reply.author_id, view.org.members, (s.member_id for s in view.org.seats)
        )
        if refused:
            person = None  # not a member, or a seat (its own echo): no person's answer
        said = []
        answers = Answers(c, c.app)
        for ask in reply.asks:
            landed = ask.landing.at_ms if ask.landing else 0
            if ask.landing is not None:
                # The ask's own message time when it has one (Slack's clock, as the reply's).
                landed = rules.reply_written_ms(landed, ask.landing.message_id, landed)
            why_not = reply_refusal(ask, person, written_ms=reply.written_ms, landed_ms=landed)
            if why_not is not None or person is None:
                said.append(f"{ask.id}:{why_not}")
                continue
            # Nothing of the reply is recorded yet (neither its answer nor the event): a
            # worker killed here leaves the event's entry open, and its next delivery answers.
            crash_point("directedness", "before_answer", f"{reply.via}:{ask.id}")
            got = answers.answer(
                ask.id,
                # The delivery is the answer's key: delivered again after a crash that came
                # between the answer and the marker below, it is the same answer, not a late one.
                AnswerIn(
                    reply.answer, person, reply.via, text=reply.text, key=candidate.delivery_id
                ),
                now_ms=now_ms,
            )
            said.append(f"{ask.id}:{got.outcome.outcome}")
        if any(s.endswith((":answered", ":late_answer")) for s in said):
            c.asks.note_reply(candidate.delivery_id)
        return said
    except (redis.RedisError, AskContended):
        raise  # the stage task runs again: the event is not recorded before its answer
    except Exception:
        # A defect, not a fault: the event still reaches its seat, and the log says which
        # answer was not recorded.
        log.exception("%s may answer an ask; it could not be recorded", candidate.delivery_id)
        return []


def _reply_of(c: Container, candidate: Candidate, *, now_ms: int) -> Reply | None:
    """The reply an event is, with the asks it may answer; None for any other event."""
    ids = candidate.ids
    msg, board = candidate.msg, candidate.board
    if candidate.family == "messaging" and msg is not None:
        root = ids.thread_root_id
        if not ids.channel_id or not root or root == ids.message_id:
            return None  # not a reply in a thread
        if ":edit:" in candidate.delivery_id:
            return None  # an edit of a reply: the reply itself was the answer
        ask_id = c.asks.by_message(ids.channel_id, root)
        ask = None if ask_id is None else c.asks.get(ask_id)
        if ask is None:
            return None
        return Reply(
            answer="replied",
            via="slack_thread",
            author_id=msg.author_id or "",
            text=msg.body,
            written_ms=rules.reply_written_ms(candidate.at_ms, ids.message_id, now_ms),
            asks=(ask,),
        )
    if candidate.family == "board" and board is not None and candidate.source == "github":
        said = github_answer(board.action, board.review_state)
        item = item_id_of(ids.issue_id)
        if said is None or item is None:
            return None
        asks = tuple(c.asks.of_item(item, MAX_ITEM_ASKS))
        if not asks:
            return None
        answer, via = said
        return Reply(
            answer=answer,
            via=via,
            author_id=board.actor_id or "",
            text=board.body,
            written_ms=min(candidate.at_ms, now_ms),
            asks=asks,
        )
    return None
