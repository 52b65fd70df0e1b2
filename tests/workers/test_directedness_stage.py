"""The directedness stage on a real Redis: every event resolved for every seat, a directed one
in that seat's inbox once, an undirected one written down with its reason, facts kept current,
notices counted, and a redelivery that changes nothing."""

from __future__ import annotations

import os
from typing import Any

import pytest
import redis

from contracts import Candidate, Limits, WorkReport
from contracts.messages import DecisionEnvelope, InboundEnvelope, ReservedEnvelope, WorkEnvelope
from tests.fakes import BLOCKED_REPORT, FakeOutbound
from workers.errors import PermanentError
from workers.org import OrgSource, learn_slack_identity
from workers.queues import Queue
from workers.settings import BUNDLED_ORG
from workers.stages import Stages
from workers.stores import keys
from workers.stores.dlq import DeadLetters
from workers.stores.inbound import InboundStore, inbound_tracking_id
from workers.stores.inbox import Inbox
from workers.stores.journal import Journal
from workers.stores.ledger import Ledger

NOW = 1_800_000_000_000


@pytest.fixture
def stages(redis_client: redis.Redis) -> Stages:
    return Stages(
        journal=Journal(redis_client),
        ledger=Ledger(redis_client, limits=Limits(), reservation_ttl_ms=60_000),
        org=OrgSource.open(BUNDLED_ORG),
        outbound=FakeOutbound(),
        inbound=InboundStore(redis_client),
        clock_ms=lambda: NOW,
    )


def slack(
    ts: str,
    *,
    channel: str = "C-PLATFORM",
    kind: str = "PUBLIC",
    author: str = "U0AVA",
    body: str = "",
    mentions: tuple[str, ...] = (),
    thread: str | None = None,
    **msg: Any,
) -> Candidate:
    return Candidate.model_validate(
        {
            "family": "messaging",
            "source": "slack",
            "deliveryId": f"slack:T1:{channel}:{ts}",
            "ids": {"channelId": channel, "messageId": ts, "threadRootId": thread},
            "msg": {
                "authorId": author,
                "body": body,
                "mentions": list(mentions),
                "channelKind": kind,
                **msg,
            },
            "atMs": NOW,
        }
    )


def accepted(stages: Stages, candidate: Candidate) -> InboundEnvelope:
    """Journal the event as the ingress does and return the message it enqueues."""
    tracking = inbound_tracking_id(candidate.delivery_id)
    env = InboundEnvelope(tracking_id=tracking, accepted_at_ms=NOW, candidate=candidate)
    stages.journal.accept(
        tracking,
        kind="inbound",
        seat_id="",
        payload=env.model_dump_json(by_alias=True),
        now_ms=NOW,
        fingerprint="",
    )
    return env


def resolve(stages: Stages, candidate: Candidate) -> dict[str, tuple[bool, str]]:
    """Run the stage on one event; each seat's (directed, reason) from its trace."""
    stages.directedness(accepted(stages, candidate))
    trace = stages.inbound.trace(candidate.delivery_id)
    assert trace is not None
    return {s.seat_id: (s.directed, s.reason) for s in trace.seats}


def inbox_ids(r: redis.Redis, seat: str) -> list[str]:
    return [i.delivery_id for i in Inbox(r).updates(seat).items]


def test_a_mention_reaches_only_the_seat_it_names(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """Every seat gets a verdict; the mentioned one gets an inbox item and a notice."""
    event = slack("1.0", body="<@U0SCOUT> can you check?", mentions=("U0SCOUT",))
    assert resolve(stages, event) == {
        "scout": (True, "mention"),
        "tally": (False, "ambient"),
    }
    assert inbox_ids(redis_client, "scout") == [event.delivery_id]
    assert inbox_ids(redis_client, "tally") == []
    assert stages.inbound.notices("scout") == 1 and stages.inbound.notices("tally") == 0
    entry = stages.journal.get(inbound_tracking_id(event.delivery_id))
    assert entry is not None and entry["state"] == "directed"
    assert redis_client.zscore(keys.JOURNAL_OPEN, entry["trackingId"]) is None
    assert redis_client.pttl(keys.journal(entry["trackingId"])) > 0


def test_an_event_for_nobody_is_written_down_for_every_seat(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """Ambient is a recorded outcome with a reason per seat, never a silent drop."""
    event = slack("2.0", body="deploy went out")
    assert resolve(stages, event) == {"scout": (False, "ambient"), "tally": (False, "ambient")}
    trace = stages.inbound.trace(event.delivery_id)
    assert trace is not None and trace.state == "ambient"
    assert all(s.why for s in trace.seats)
    assert inbox_ids(redis_client, "scout") == inbox_ids(redis_client, "tally") == []


def test_a_redelivered_event_changes_nothing(stages: Stages, redis_client: redis.Redis) -> None:
    """Idempotent per (event, seat): one item, one notice, the first verdicts kept."""
    event = slack("3.0", body="<@U0SCOUT> and <@U0TALLY>?", mentions=("U0SCOUT", "U0TALLY"))
    env = accepted(stages, event)
    first = stages.directedness(env)
    again = stages.directedness(env)
    assert first.new and not again.new and again.state == "directed"
    assert first.positions == {"scout": 1, "tally": 1} and again.positions == {}
    assert (
        inbox_ids(redis_client, "scout") == inbox_ids(redis_client, "tally") == [event.delivery_id]
    )
    assert stages.inbound.notices("scout") == 1


def test_a_private_channel_the_seat_is_not_in_is_not_acted_on(stages: Stages) -> None:
    """C-REVIEW is private to ben, chloe and scout: tally mentioned there must not act."""
    event = slack("4.0", channel="C-REVIEW", kind="PRIVATE", mentions=("U0TALLY", "U0SCOUT"))
    assert resolve(stages, event) == {
        "scout": (True, "mention"),
        "tally": (False, "not_visible"),
    }


def test_a_dm_delivered_to_a_seat_reaches_it(stages: Stages) -> None:
    """An IM the org file does not list is the seat's when Slack delivered it to the seat's
    own user; learned once, later messages there reach it without the audience."""
    first = slack(
        "5.0", channel="D0SCOUT", kind="DM", body="got a minute?", audienceIds=["U0SCOUT"]
    )
    assert resolve(stages, first) == {"scout": (True, "dm"), "tally": (False, "ambient")}
    later = slack("5.1", channel="D0SCOUT", kind="DM", body="still there?")
    assert resolve(stages, later)["scout"] == (True, "dm")


def test_a_thread_the_seat_was_named_in_keeps_reaching_it(stages: Stages) -> None:
    """Named in a top-level message, the seat hears the replies in its thread that name
    nobody; the other seat does not."""
    resolve(stages, slack("6.0", body="Scout, the migration is yours"))
    reply = slack("6.5", thread="6.0", body="any update?")
    assert resolve(stages, reply) == {
        "scout": (True, "thread_participant"),
        "tally": (False, "ambient"),
    }


def test_the_seats_own_message_is_an_echo_that_makes_its_thread_followed(stages: Stages) -> None:
    """The seat's own message is not news to it, but replies under it are."""
    mine = slack("7.0", author="U0SCOUT", body="I will take the migration")
    assert resolve(stages, mine)["scout"] == (False, "own_echo")
    reply = slack("7.2", thread="7.0", body="thanks!")
    assert resolve(stages, reply)["scout"] == (True, "thread_participant")


def test_what_a_seat_sends_joins_it_to_that_thread(stages: Stages) -> None:
    """After the send stage posts an ask, a reply in the thread it started reaches the seat."""
    work = dict(BLOCKED_REPORT)
    stages.journal.accept(
        "t-1", kind="work", seat_id="scout", payload="{}", now_ms=NOW, fingerprint="f"
    )
    decided = stages.engagement(
        WorkEnvelope(
            tracking_id="t-1",
            seat_id="scout",
            accepted_at_ms=NOW,
            report=WorkReport.model_validate(work),
        )
    )
    assert isinstance(decided, DecisionEnvelope)
    reserved = stages.guardrails(decided)
    assert isinstance(reserved, ReservedEnvelope)
    assert stages.send(reserved) == "engaged"
    op = stages.ledger.op_state("t-1")
    channel, message = op["channelId"], op["messageId"]
    reply = slack("8.0", channel=channel, kind="DM", thread=message, author="U0BEN", body="done")
    assert resolve(stages, reply)["scout"] == (True, "dm")  # the DM it opened is its own
    other = slack("8.1", channel=channel, kind="PUBLIC", thread=message, body="done")
    assert resolve(stages, other)["scout"] == (True, "thread_participant")


def test_an_event_whose_journal_entry_is_gone_is_a_permanent_failure(stages: Stages) -> None:
    """Nothing is recorded for an event the journal never accepted: the task gives up loudly."""
    event = slack("9.0", mentions=("U0SCOUT",))
    env = InboundEnvelope(tracking_id="ev-missing", accepted_at_ms=NOW, candidate=event)
    with pytest.raises(PermanentError):
        stages.directedness(env)


def give_up(r: redis.Redis, env: InboundEnvelope, error: str) -> str:
    """What the directedness task's failure path does when the stage gives up."""
    return DeadLetters(r).give_up(
        env.tracking_id,
        queue=Queue.DIRECTEDNESS,
        reason="permanent:RuntimeError",
        error=error,
        message=env.to_wire(),
        now_ms=NOW,
    )


def test_a_failed_entry_replayed_is_resolved_and_leaves_the_failed_index(
    stages: Stages, redis_client: redis.Redis
) -> None:
    event = slack("10.0", mentions=("U0SCOUT",))
    env = accepted(stages, event)
    give_up(redis_client, env, "boom")
    assert stages.directedness(env).new
    entry = stages.journal.get(env.tracking_id)
    assert entry is not None and entry["state"] == "directed" and "error" not in entry
    assert redis_client.zscore(keys.JOURNAL_FAILED, env.tracking_id) is None


def test_trace_lists_directed_seats_first_with_positions(stages: Stages) -> None:
    event = slack("11.0", mentions=("U0TALLY",))
    resolve(stages, event)
    trace = stages.inbound.trace(event.delivery_id)
    assert trace is not None
    assert [(s.seat_id, s.position) for s in trace.seats] == [("tally", 1), ("scout", None)]
    assert (trace.deliveries, trace.source, trace.family) == (1, "slack", "messaging")
    assert stages.inbound.trace("slack:T1:C-PLATFORM:never") is None


def test_a_stage_giving_up_after_its_write_does_not_reopen_the_event(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """The script landed, then the task failed (its reply lost): the entry stays resolved,
    and a replay writes nothing twice. A failure for an entry that is gone writes nothing."""
    event = slack("12.0", mentions=("U0SCOUT",))
    env = accepted(stages, event)
    stages.directedness(env)
    assert give_up(redis_client, env, "x") == "directed"
    assert not stages.directedness(env).new
    assert inbox_ids(redis_client, "scout") == [event.delivery_id]
    assert redis_client.zscore(keys.JOURNAL_FAILED, env.tracking_id) is None
    gone = env.model_copy(update={"tracking_id": "ev-gone"})
    assert give_up(redis_client, gone, "x") == "missing"
    assert not redis_client.exists(keys.journal("ev-gone"))


def test_a_seat_answers_to_its_members_aliases_too(
    redis_client: redis.Redis, tmp_path: Any
) -> None:
    """A Slack id written on the member only (not repeated on the seat) still makes `<@U…>`
    a mention of the seat, and the seat's own message an echo, not an item in its inbox."""
    org = tmp_path / "org.yaml"
    org.write_text(
        "members:\n"
        "  - {id: ann, aliases: [U0ANN]}\n"
        "  - {id: bot, aliases: [U0BOT]}\n"
        "seats:\n"
        "  - {memberId: bot}\n"
    )
    stages = Stages(
        journal=Journal(redis_client),
        ledger=Ledger(redis_client, limits=Limits(), reservation_ttl_ms=60_000),
        org=OrgSource.open(org),
        outbound=FakeOutbound(),
        inbound=InboundStore(redis_client),
        clock_ms=lambda: NOW,
    )
    assert resolve(stages, slack("13.0", author="U0ANN", mentions=("U0BOT",))) == {
        "bot": (True, "mention")
    }
    mine = slack("13.1", channel="D9", kind="DM", author="U0BOT", audienceIds=["U0BOT"])
    assert resolve(stages, mine) == {"bot": (False, "own_echo")}


def github(n: int, action: str, *, actor: str = "ava", **board: Any) -> Candidate:
    return Candidate.model_validate(
        {
            "family": "board",
            "source": "github",
            "deliveryId": f"github:acme/platform/42/{action}/{n}",
            "ids": {"channelId": "acme/platform", "issueId": "acme/platform#42"},
            "board": {"action": action, "actorId": actor, "ownerIds": ["ava"], **board},
            "atMs": NOW,
        }
    )


@pytest.mark.parametrize(
    "first",
    [
        github(1, "commented", mentions=["scout"]),
        github(1, "commented", actor="scout"),
        github(1, "opened", actor="scout"),
        github(1, "review_requested", reviewerIds=["scout"]),
        github(1, "assigned", assigneeIds=["scout"]),
    ],
    ids=["mentioned", "commented", "opened", "review-requested", "assigned"],
)
def test_a_seat_follows_a_board_item_it_is_involved_in(
    stages: Stages, redis_client: redis.Redis, first: Candidate
) -> None:
    """Mentioned in, commented on, opened, asked to review or assigned: the item's later
    comments and reviews reach the seat as thread replies; other seats hear nothing; the
    fact fades FACT_TTL_MS after the seat's last involvement."""
    resolve(stages, first)
    assert resolve(stages, github(2, "commented", actor="ben"))["scout"] == (True, "item_activity")
    review = github(3, "reviewed", actor="ben", reviewState="approved")
    assert resolve(stages, review) == {
        "scout": (True, "item_activity"),
        "tally": (False, "ambient"),
    }
    fact = keys.item_seats("acme/platform#42")
    assert 0 < redis_client.pttl(fact) <= stages.inbound.fact_ttl_ms
    redis_client.delete(fact)  # what fading leaves
    assert resolve(stages, github(4, "commented", actor="ben"))["scout"] == (False, "ambient")


def test_a_seats_bot_id_from_the_org_file_makes_its_post_an_echo(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """`slackBotId` on a seat (examples/org.yaml gives scout B0SCOUT001): a post carrying only
    that bot_id, naming the seat, is its own echo and never reaches its inbox."""
    event = slack("9.0", author="B0SCOUT001", body="Scout here: the billing copy is done.")
    assert resolve(stages, event)["scout"] == (False, "own_echo")
    assert inbox_ids(redis_client, "scout") == []


def test_auth_test_names_the_seat_whose_bot_posts(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """auth.test's bot user is tally's alias: its bot_id becomes tally's own identity, so a
    bot_id-only post naming Tally is tally's echo; scout is not affected."""
    said = learn_slack_identity(stages.org, {"user_id": "U0TALLY", "bot_id": "B0TALLYAPP"})
    assert "tally" in said
    event = slack("10.0", author="B0TALLYAPP", body="Tally here: March is reconciled.")
    assert resolve(stages, event) == {"scout": (False, "ambient"), "tally": (False, "own_echo")}


def test_a_bot_no_seat_answers_to_is_every_seats_echo_and_nobodys_mention(
    stages: Stages, redis_client: redis.Redis
) -> None:
    """One app token for the whole org: its posts are every seat's own echo (a seat must not
    answer what Seatwire itself posted), and a mention of that bot addresses no one seat."""
    learn_slack_identity(stages.org, {"user_id": "U0SHARED", "bot_id": "B0SHARED"})
    post = slack("11.0", author="B0SHARED", body="Scout and Tally: done.")
    assert resolve(stages, post) == {"scout": (False, "own_echo"), "tally": (False, "own_echo")}
    ask = slack("12.0", body="<@U0SHARED> who owns this?", mentions=("U0SHARED",))
    assert resolve(stages, ask) == {"scout": (False, "ambient"), "tally": (False, "ambient")}


def test_learned_identities_survive_a_reload_of_the_org_file(
    redis_client: redis.Redis, tmp_path: Any
) -> None:
    """A changed org file is re-read with what auth.test taught still applied."""
    org = tmp_path / "org.yaml"
    org.write_text(BUNDLED_ORG.read_text())
    source = OrgSource.open(org)
    learn_slack_identity(source, {"user_id": "U0SCOUT", "bot_id": "B0LEARNT"})
    org.write_text(BUNDLED_ORG.read_text() + "\n# touched\n")
    os.utime(org, (1, 1))
    view, degraded = source.current()
    assert degraded == []
    [scout] = [s for s in view.roster.seats if s.member_id == "scout"]
    assert "b0learnt" in scout.own
