"""The Slack adapter against the fake Slack server through slack_sdk: where each surface
posts, mentions, the idempotency id in metadata, reconciliation, and the error classes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import Mention
from contracts.messages import OutboundAsk
from tests.fake_slack import (
    FakeSlack,
    Fault,
    apply_then_hang,
    apply_then_reset,
    error,
    http_error,
    rate_limited,
)
from workers.embedded import free_port
from workers.errors import ConfigError, MaybeSent, NotSent, PermanentError
from workers.outbound.base import SendContext
from workers.outbound.slack import EVENT_TYPE, SlackOutbound, render_text, room_name

PEOPLE = {
    "ben": (("U0BEN", "ben@example.com"), "Ben Lindqvist"),
    "ava": (("ava@example.com", "U0AVA"), "Ava Okafor"),
    "kai": ((), "Kai Sorensen"),
}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


def adapter(slack: FakeSlack, timeout_s: float = 5) -> SlackOutbound:
    return SlackOutbound(
        token=slack.token, api_url=slack.url, timeout_s=timeout_s, directory=lambda: PEOPLE
    )


def ask(n: int = 1, **kw: object) -> OutboundAsk:
    fields: dict[str, object] = {
        "idempotency_id": f"engage-dk{n}-1",
        "tracking_id": f"t{n}",
        "seat_id": "scout",
        "work_id": "billing-migration",
        "attempt": 1,
        "surface": "dm",
        "member_ids": ("ben",),
        "mentions": (Mention(member_id="ben"),),
        "body": "**Blocked: billing**\n\n@Ben Lindqvist — can you grant access?",
    }
    fields.update(kw)
    return OutboundAsk.model_validate(fields)


def ctx(notes: dict[str, str] | None = None) -> SendContext:
    return SendContext(now_ms=1_800_000_000_000, since_ms=0, notes=dict(notes or {}))


def test_a_dm_is_posted_once_with_its_id_in_metadata_and_a_real_mention(
    slack: FakeSlack,
) -> None:
    result = adapter(slack).send(ask(), ctx())
    (post,) = slack.posts()
    assert post.channel == result.channel_id and post.channel.startswith("D")
    assert result.message_id == post.ts
    assert post.metadata == {
        "event_type": EVENT_TYPE,
        "event_payload": {
            "idempotency_id": "engage-dk1-1",
            "tracking_id": "t1",
            "seat_id": "scout",
        },
    }
    assert post.text.startswith("*Blocked: billing*") and "<@U0BEN> — can you" in post.text


def test_several_people_get_a_group_dm(slack: FakeSlack) -> None:
    result = adapter(slack).send(ask(member_ids=("ben", "ava")), ctx())
    assert result.channel_id.startswith("G")
    assert slack.members(result.channel_id) >= {"U0BEN", "U0AVA"}


def test_a_reply_goes_in_its_thread_and_is_found_there(slack: FakeSlack) -> None:
    slack.add_channel("C1", name="platform")
    box = adapter(slack)
    root = box.send(ask(1, surface="existing_channel", channel_id="C1"), ctx())
    reply = ask(2, surface="reply_in_place", channel_id="C1", thread_root_id=root.message_id)
    sent = box.send(reply, ctx())
    assert slack.posts()[-1].thread_ts == root.message_id
    assert box.reconcile(reply, ctx()) == sent


def test_a_room_is_created_once_and_reused_after_a_crash(slack: FakeSlack) -> None:
    box = adapter(slack)
    room = ask(surface="new_room", room_name="Billing migration", member_ids=("ben", "ava"))
    notes: dict[str, str] = {}
    first = SendContext(now_ms=1, since_ms=0, record=notes.update)
    slack.script("chat.postMessage", [rate_limited(retry_after=1)])
    with pytest.raises(NotSent):
        box.send(room, first)
    assert notes["room"] and notes["invited"] == "1"
    assert slack.members(notes["room"]) >= {"U0BEN", "U0AVA"}
    again = box.send(room, ctx(notes))
    assert again.channel_id == notes["room"] and again.room_created
    # A try that died between creating the room and writing it down finds it by its name.
    lost = box.send(room, ctx())
    assert lost.channel_id == notes["room"]
    assert [p.channel for p in slack.posts()] == [notes["room"]] * 2
    assert room_name(room).startswith("billing-migration-")


def test_reconcile_finds_a_post_whose_answer_was_lost_and_proves_absence(
    slack: FakeSlack,
) -> None:
    box = adapter(slack, timeout_s=1)
    slack.script("chat.postMessage", [apply_then_hang(3)])
    with pytest.raises(MaybeSent):
        box.send(ask(), ctx())
    found = box.reconcile(ask(), ctx())
    assert found is not None and found.message_id == slack.posts()[0].ts
    assert box.reconcile(ask(9), ctx()) is None


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (rate_limited(retry_after=2), NotSent),
        (error("ratelimited"), NotSent),
        (http_error(500), MaybeSent),
        (error("internal_error", applied=True), MaybeSent),
        (error("fatal_error"), MaybeSent),
        (apply_then_reset(), MaybeSent),
        (error("channel_not_found"), PermanentError),
        (error("msg_too_long"), PermanentError),
        (error("invalid_auth"), PermanentError),
    ],
)
def test_post_failures_are_classed(
    slack: FakeSlack, fault: Fault, expected: type[Exception]
) -> None:
    slack.script("chat.postMessage", [fault])
    with pytest.raises(expected) as caught:
        adapter(slack).send(ask(), ctx())
    if isinstance(caught.value, NotSent) and "429" in str(caught.value):
        assert caught.value.retry_after_s == 2


def test_a_failure_before_the_post_is_never_in_doubt(slack: FakeSlack) -> None:
    slack.script("conversations.open", [http_error(500)])
    with pytest.raises(NotSent):
        adapter(slack).send(ask(), ctx())
    assert slack.posts() == []


def test_a_reconciliation_that_cannot_read_stays_in_doubt(slack: FakeSlack) -> None:
    slack.script("conversations.history", [rate_limited(retry_after=5)])
    with pytest.raises(MaybeSent) as unsure:
        adapter(slack).reconcile(ask(), ctx())
    assert unsure.value.retry_after_s == 5  # the next look-up waits as Slack asked
    slack.script("conversations.history", [error("missing_scope")])
    with pytest.raises(PermanentError, match="not sent again"):
        adapter(slack).reconcile(ask(), ctx())


def test_a_person_without_a_slack_id_is_a_permanent_failure(slack: FakeSlack) -> None:
    with pytest.raises(PermanentError, match="no Slack user id for kai"):
        adapter(slack).send(ask(member_ids=("kai",)), ctx())


def test_start_refuses_a_bad_token_and_an_unreachable_api(slack: FakeSlack) -> None:
    assert "U0SEATWIREBOT" in adapter(slack).check()
    wrong = SlackOutbound(token="xoxb-wrong", api_url=slack.url, timeout_s=2, directory=dict)
    with pytest.raises(ConfigError, match="invalid_auth"):
        wrong.check()
    nowhere = f"http://127.0.0.1:{free_port()}/api/"
    with pytest.raises(ConfigError, match="cannot reach"):
        SlackOutbound(token="x", api_url=nowhere, timeout_s=2, directory=dict).check()


def test_mentions_without_their_name_in_the_text_lead_the_message() -> None:
    text = render_text(
        ask(body="Please look.", mentions=(Mention(member_id="ava"), Mention(member_id="kai"))),
        {"ava": "U0AVA"},
        {"ava": "Ava Okafor", "kai": "Kai Sorensen"},
    )
    assert text == "<@U0AVA> Please look."


def test_18_run_a_the_sdks_default_retry_would_have_posted_twice(slack: FakeSlack) -> None:
    """Fault test 18 (docs/reliability.md), run A: slack_sdk's default handler re-sends after a
    reset, so a post that was applied lands twice. This is why the adapter posts with retries off
    (run B is the end-to-end test, which sees one post)."""
    from slack_sdk import WebClient

    slack.script("chat.postMessage", [apply_then_reset()])
    client = WebClient(token=slack.token, base_url=slack.url, timeout=2)  # default handlers
    client.chat_postMessage(
        channel=adapter(slack)._open(ask(), {"ben": "U0BEN"}),
        text="hello",
        metadata={"event_type": EVENT_TYPE, "event_payload": {"idempotency_id": "x"}},
    )
    assert slack.duplicates() == {"x": 2}


def test_a_name_that_starts_another_is_not_mistaken_for_it() -> None:
    text = render_text(
        ask(body="@Anna and @Ann, please look.", mentions=(Mention(member_id="ann"),)),
        {"ann": "U0ANN"},
        {"ann": "Ann"},
    )
    assert text == "@Anna and <@U0ANN>, please look."


@pytest.mark.parametrize(
    ("value", "wait"),
    [
        ("2", 2.0),
        ("0.5", 0.5),
        ("-3", 0.0),
        ("inf", 3600.0),
        ("1e9", 3600.0),
        ("nan", None),
        ("soon", None),
    ],
)
def test_a_retry_after_is_read_finite_and_at_most_an_hour(value: str, wait: float | None) -> None:
    from workers.outbound.base import seconds

    assert seconds(value) == wait


def test_a_process_learns_its_slack_bots_identity_at_start(
    slack: FakeSlack, redis_client: Any, redis_url: str, tmp_path: Path
) -> None:
    """With the Slack adapter, a worker's container learns from auth.test what the token's
    bot is, so a post carrying only its `bot_id` is a seat's own echo; a failing auth.test is
    reported, not raised."""
    from pydantic import SecretStr

    from workers import bootstrap
    from workers.settings import Settings

    settings = Settings(
        redis_url=redis_url,
        api_token="t",
        outbound="slack",
        slack_bot_token=SecretStr(slack.token),
        slack_api_url=slack.url,
        outbox_path=tmp_path / "o.jsonl",
    )
    container = bootstrap.build_container(settings, client=redis_client)
    learned = bootstrap.learn_own_identity(container)
    assert learned is not None and "B0SEATWIRE" in learned
    assert any("B0SEATWIRE" in ids for ids in container.org.learned.values())

    broken = bootstrap.build_container(
        settings.model_copy(update={"slack_bot_token": SecretStr("xoxb-wrong")}),
        client=redis_client,
    )
    said = bootstrap.learn_own_identity(broken)
    assert said is not None and said.startswith("could not learn")
    assert broken.org.learned == {}


def test_people_are_worked_out_once_per_directory_and_again_when_it_changes(
    slack: FakeSlack,
) -> None:
    """The adapter reads `directory()` at each send but walks it only when it hands back a
    different mapping (an org file reloaded): a member added then is reachable at once."""
    walked: list[str] = []

    class Directory(dict[str, tuple[tuple[str, ...], str]]):
        def items(self) -> Any:
            walked.append("walk")
            return super().items()

    current = Directory(PEOPLE)
    outbound = SlackOutbound(
        token=slack.token, api_url=slack.url, timeout_s=5, directory=lambda: current
    )
    outbound.send(ask(1), ctx())
    outbound.send(ask(2), ctx())
    assert walked == ["walk"]
    with pytest.raises(PermanentError, match="no Slack user id for zoe"):
        outbound.send(ask(3, member_ids=("zoe",), mentions=()), ctx())
    current = Directory({**PEOPLE, "zoe": (("U0ZOE",), "Zoe Park")})  # the org file reloaded
    outbound.send(ask(4, member_ids=("zoe",), mentions=()), ctx())
    assert walked == ["walk", "walk"]
    assert len(slack.posts()) == 3


# ------------------------------------------------------------------ an ask's buttons in place

BUTTONS = {
    "irreversible_or_external": [
        ("seatwire_answer:approved", "Approve", "primary", "ask-dk1-1|approved"),
        (
            "seatwire_answer:approved:week",
            "Approve for a week",
            None,
            "ask-dk1-1|approved|604800000",
        ),
        ("seatwire_answer:declined", "Decline", "danger", "ask-dk1-1|declined"),
        ("seatwire_answer:snoozed", "Snooze", None, "ask-dk1-1|snoozed"),
    ],
    "mandatory_review": [
        ("seatwire_answer:approved", "Approve", "primary", "ask-dk1-1|approved"),
        ("seatwire_answer:declined", "Request changes", None, "ask-dk1-1|declined"),
    ],
    "blocked_on_other": [
        ("seatwire_answer:done", "Done", "primary", "ask-dk1-1|done"),
        ("seatwire_answer:snoozed", "Snooze", None, "ask-dk1-1|snoozed"),
    ],
    "commitment_at_risk": [
        ("seatwire_answer:done", "Done", "primary", "ask-dk1-1|done"),
        ("seatwire_answer:snoozed", "Snooze", None, "ask-dk1-1|snoozed"),
    ],
}


def buttons_of(blocks: list[Any] | None) -> list[tuple[str, str, str | None, str]]:
    return [
        (e["action_id"], e["text"]["text"], e.get("style"), e["value"])
        for b in blocks or ()
        if b["type"] == "actions"
        for e in b["elements"]
    ]


@pytest.mark.parametrize("trigger", sorted(BUTTONS))
def test_an_ask_carries_the_buttons_of_its_trigger(slack: FakeSlack, trigger: str) -> None:
    box = adapter(slack)
    sent = box.send(ask(ask_id="ask-dk1-1", trigger=trigger), ctx())
    (post,) = slack.posts()
    assert post.blocks is not None
    section, actions = post.blocks
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": post.text}}
    assert actions["block_id"] == "seatwire_ask:ask-dk1-1"
    assert buttons_of(post.blocks) == BUTTONS[trigger]
    confirms = [e["action_id"] for e in actions["elements"] if "confirm" in e]
    assert confirms == (["seatwire_answer:declined"] if trigger.startswith("irr") else [])
    # The metadata is as before, so reconciliation finds the message with its buttons.
    assert box.reconcile(ask(ask_id="ask-dk1-1", trigger=trigger), ctx()) == sent


def test_an_ask_without_a_record_or_a_known_trigger_has_no_buttons(slack: FakeSlack) -> None:
    box = adapter(slack)
    box.send(ask(1), ctx())
    box.send(ask(2, ask_id="ask-dk2-1", trigger="something_else"), ctx())
    plain, unknown = slack.posts()
    assert plain.blocks is None
    assert unknown.blocks is not None and [b["type"] for b in unknown.blocks] == ["section"]


def test_a_long_ask_keeps_its_whole_text_and_cuts_only_the_section(slack: FakeSlack) -> None:
    body = "**Blocked**\n\n" + "word " * 1_000 + "\n\n@Ben Lindqvist — can you?"
    adapter(slack).send(ask(body=body, ask_id="ask-dk1-1", trigger="blocked_on_other"), ctx())
    (post,) = slack.posts()
    assert post.text.endswith("<@U0BEN> — can you?") and len(post.text) > 3_000
    assert post.blocks is not None
    section = post.blocks[0]["text"]["text"]
    assert len(section) == 3_000 and section.endswith("…")
    assert post.text.startswith(section[:-1])


def record(**kw: Any) -> Any:
    """An ask record as the store keeps it, landed in `channel`/`ts` (set by the test)."""
    from contracts.asks import Ask

    fields: dict[str, Any] = {
        "id": "ask-dk1-1",
        "seatId": "scout",
        "workId": "billing-migration",
        "trigger": "irreversible_or_external",
        "reason": "ben must say yes before the table is dropped",
        "body": "**Needs your go-ahead:** drop it\n\n@Ben Lindqvist — what would you like?",
        "targets": [{"memberId": "ben", "rung": "ownership"}],
        "dedupeKey": "dk1",
        "trackingId": "t1",
        "createdAtMs": 1_800_000_000_000,
        "state": "open",
    }
    fields.update(kw)
    return Ask.model_validate(fields)


def landed_record(slack: FakeSlack, box: SlackOutbound, **kw: Any) -> Any:
    sent = box.send(ask(ask_id="ask-dk1-1", trigger="irreversible_or_external"), ctx())
    landing = {
        "adapter": "slack",
        "channelId": sent.channel_id,
        "messageId": sent.message_id,
        "atMs": 1_800_000_000_000,
    }
    return record(landing=landing, **kw)


def test_show_answer_says_who_approved_and_when_without_buttons(slack: FakeSlack) -> None:
    box = adapter(slack)
    answered = landed_record(
        slack,
        box,
        state="answered",
        answer={
            "answer": "approved",
            "by": "ben",
            "via": "slack_button",
            "atMs": 1_800_000_060_000,
            "consentId": "consent-dk1-1",
            "consentExpiresAtMs": 1_800_086_460_000,
        },
    )
    assert box.show_answer(answered) is True
    (update,) = slack.updates()
    (post,) = slack.posts()
    assert (update.channel, update.ts) == (post.channel, post.ts)
    assert update.blocks is not None
    # No answer buttons once answered: only the approved consent's own "Revoke consent".
    section, context, revoke = update.blocks
    assert revoke["block_id"] == "seatwire_consent:consent-dk1-1"
    assert [e["action_id"] for e in revoke["elements"]] == ["seatwire_revoke"]
    assert section["text"]["text"].startswith("*Needs your go-ahead:* drop it")
    assert "<@U0BEN> — what would you like?" in section["text"]["text"]
    line = context["elements"][0]["text"]
    assert line == (
        "*Approved* by <@U0BEN> on <!date^1800000060^{date_short_pretty} at {time}|"
        "2027-01-15 08:01 UTC> · consent on record until <!date^1800086460^"
        "{date_short_pretty} at {time}|2027-01-16 08:01 UTC>"
    )
    assert update.text.endswith(line) and update.metadata is None  # metadata left as it was
    # The message as Slack now serves it: the new blocks, the old metadata (reconcile reads it).
    found = box.reconcile(ask(ask_id="ask-dk1-1", trigger="irreversible_or_external"), ctx())
    assert found is not None and found.message_id == post.ts


def test_a_revoked_or_expired_consent_is_shown_without_its_revoke_button(
    slack: FakeSlack,
) -> None:
    approval = {
        "answer": "approved",
        "by": "ben",
        "via": "slack_button",
        "atMs": 1_800_000_060_000,
        "consentId": "consent-dk1-1",
        "consentExpiresAtMs": 1_800_086_460_000,
    }
    clock = [1_800_000_100_000]
    box = SlackOutbound(
        token=slack.token,
        api_url=slack.url,
        timeout_s=5,
        directory=lambda: PEOPLE,
        clock_ms=lambda: clock[0],
    )
    revoked = landed_record(
        slack,
        box,
        state="answered",
        answer={**approval, "consentRevokedAtMs": 1_800_000_090_000, "consentRevokedBy": "ben"},
    )
    assert box.show_answer(revoked) is True
    update = slack.updates()[-1]
    assert update.blocks is not None
    assert [b["type"] for b in update.blocks] == ["section", "context"]
    line = update.blocks[1]["elements"][0]["text"]
    assert line.endswith(
        "· consent revoked by <@U0BEN> on <!date^1800000090^{date_short_pretty} at {time}|"
        "2027-01-15 08:01 UTC>"
    )
    assert "on record" not in line
    clock[0] = 1_800_086_460_000  # the consent's day is over
    assert box.show_answer(landed_record(slack, box, state="answered", answer=approval))
    assert [b["type"] for b in slack.updates()[-1].blocks or ()] == ["section", "context"]


def test_show_answer_names_a_member_without_a_slack_id_by_id(slack: FakeSlack) -> None:
    box = adapter(slack)
    answered = landed_record(
        slack,
        box,
        trigger="mandatory_review",
        state="answered",
        answer={
            "answer": "declined",
            "by": "kai",
            "via": "api",
            "atMs": 1_800_000_060_000,
            "text": "the index is missing",
        },
    )
    box.show_answer(answered)
    (update,) = slack.updates()
    assert update.blocks is not None
    line = update.blocks[1]["elements"][0]["text"]
    assert line.startswith("*Changes requested* by kai on <!date^1800000060^")
    assert line.endswith(": “the index is missing”")


def test_a_snoozed_ask_keeps_its_buttons_and_says_until_when(slack: FakeSlack) -> None:
    box = adapter(slack)
    snoozed = landed_record(
        slack,
        box,
        state="snoozed",
        snoozeUntilMs=1_800_007_200_000,
        history=[
            {
                "atMs": 1_800_000_001_000,
                "event": "snoozed",
                "reasonCode": "snoozed",
                "why": "ben snoozed it",
                "by": "ben",
            }
        ],
    )
    box.show_answer(snoozed)
    (update,) = slack.updates()
    assert [b["type"] for b in update.blocks or ()] == ["section", "context", "actions"]
    assert buttons_of(update.blocks) == BUTTONS["irreversible_or_external"]
    assert update.blocks is not None
    assert update.blocks[1]["elements"][0]["text"] == (
        "*Snoozed* by <@U0BEN> until <!date^1800007200^{date_short_pretty} at {time}|"
        "2027-01-15 10:00 UTC>"
    )


def test_a_closed_ask_says_why_and_offers_nothing(slack: FakeSlack) -> None:
    box = adapter(slack)
    box.show_answer(landed_record(slack, box, state="closed", closed="expired"))
    (update,) = slack.updates()
    assert update.blocks is not None and buttons_of(update.blocks) == []
    assert update.blocks[1]["elements"][0]["text"] == "*Closed*: nobody answered in time"


def test_an_escalated_ask_says_whom_it_went_up_to_and_stays_answerable(slack: FakeSlack) -> None:
    box = adapter(slack)
    step = {
        "level": 1,
        "targetId": "ava",
        "rung": "target_supervisor",
        "atMs": 1_800_014_400_000,
        "trackingId": "t-up",
    }
    box.show_answer(landed_record(slack, box, state="escalated", escalations=[step]))
    (update,) = slack.updates()
    assert update.blocks is not None
    assert update.blocks[1]["elements"][0]["text"].startswith(
        "No answer yet: also asked <@U0AVA> on <!date^1800014400^"
    )
    assert len(buttons_of(update.blocks)) == 4


def test_show_answer_without_a_landing_changes_nothing_and_a_gone_message_fails(
    slack: FakeSlack,
) -> None:
    box = adapter(slack)
    assert box.show_answer(record()) is False
    gone = landed_record(slack, box)
    gone = gone.model_copy(
        update={"landing": gone.landing.model_copy(update={"message_id": "1.000001"})}
    )
    with pytest.raises(PermanentError, match="message_not_found"):
        box.show_answer(gone)
    assert slack.updates() == []
