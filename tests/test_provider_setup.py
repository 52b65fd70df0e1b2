"""The Slack app manifest (deploy/slack/manifest.yaml) and the GitHub webhook setup in
docs/security.md hold to what the code does: the scopes are exactly those of the Web API
methods workers/ calls and of the events it reads, the bot events are those the normaliser
accepts, and the request URL is the ingress's Slack route."""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from slack_sdk import WebClient

from pipeline.normalise.github import SUPPORTED
from pipeline.normalise.slack import CHANNEL_TYPES, MESSAGE_EVENTS

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "deploy" / "slack" / "manifest.yaml"

# The bot scopes each Web API method needs as Seatwire calls it, from each method's "Required
# scopes" (https://docs.slack.dev/reference/methods/<method>). A conversations.* method needs
# only the scope of the conversation type it is used on.
METHOD_SCOPES: dict[str, frozenset[str]] = {
    # auth.test: no scope (docs.slack.dev/reference/methods/auth.test).
    "auth.test": frozenset(),
    # chat.postMessage: chat:write. Seatwire posts only where its bot is a member (or in a
    # conversation it opened), so not chat:write.public.
    "chat.postMessage": frozenset({"chat:write"}),
    # chat.update: chat:write, on the bot's own ask message (showing its answer in place).
    "chat.update": frozenset({"chat:write"}),
    # conversations.open: im:write for one person, mpim:write for several (`users` is a list).
    "conversations.open": frozenset({"im:write", "mpim:write"}),
    # conversations.create with is_private=True: groups:write (channels:manage is public).
    "conversations.create": frozenset({"groups:write"}),
    # conversations.invite, only into the private room Seatwire created: groups:write.
    "conversations.invite": frozenset({"groups:write"}),
    # conversations.list with types=private_channel,public_channel: groups:read, channels:read.
    "conversations.list": frozenset({"channels:read", "groups:read"}),
    # conversations.history and .replies, reconciling a post wherever an ask can go (a channel,
    # a private channel or room, a DM, a group DM): the four *:history scopes.
    "conversations.history": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
    "conversations.replies": frozenset(
        {"channels:history", "groups:history", "im:history", "mpim:history"}
    ),
}

# The scope each bot event needs (docs.slack.dev/reference/events/<event>).
EVENT_SCOPES: dict[str, str] = {
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
}

# A `message` event's `channel_type` and the subscription that delivers it (Slack's "message"
# event: message.channels carries channel_type `channel`, message.groups `group`, ...).
MESSAGE_SUBSCRIPTION: dict[str, str] = {
    "channel": "message.channels",
    "group": "message.groups",
    "im": "message.im",
    "mpim": "message.mpim",
}

# GitHub's name, in a webhook's "Let me select individual events", of each event the GitHub
# normaliser reads.
GITHUB_EVENT_LABELS: dict[str, str] = {
    "issues": "Issues",
    "issue_comment": "Issue comments",
    "pull_request": "Pull requests",
    "pull_request_review": "Pull request reviews",
    "pull_request_review_comment": "Pull request review comments",
}


@cache
def web_api_names() -> dict[str, str]:
    """slack_sdk's WebClient method name -> the Web API method it calls (`chat_postMessage` ->
    `chat.postMessage`), read from each method's own `api_call`."""
    called = re.compile(r'api_call\(\s*"([\w.]+)"')
    names: dict[str, str] = {}
    for name, function in inspect.getmembers(WebClient, inspect.isfunction):
        found = called.findall(inspect.getsource(function))
        if not name.startswith("_") and found:
            names[name] = found[0]
    return names


def methods_called(sources: dict[str, str]) -> dict[str, str]:
    """Each Web API method the given sources use (called, or handed on as a callable), with
    one place that uses it ('path:line')."""
    names = web_api_names()
    found: dict[str, str] = {}
    for where, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr in names:
                found.setdefault(names[node.attr], f"{where}:{node.lineno}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "api_call"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.setdefault(str(node.args[0].value), f"{where}:{node.lineno}")
    return found


def workers_sources() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "workers").rglob("*.py"))
    }


def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return loaded


def test_the_scanner_finds_client_calls_and_callables_handed_on() -> None:
    """A called method, one passed as a callable and a raw api_call are all found."""
    source = (
        "def f(client, call):\n"
        "    client.users_info(user='U1')\n"
        "    call('x', client.reactions_add)\n"
        "    client.api_call('team.info')\n"
    )
    assert methods_called({"x.py": source}) == {
        "users.info": "x.py:2",
        "reactions.add": "x.py:3",
        "team.info": "x.py:4",
    }


def test_every_web_api_method_seatwire_calls_has_its_scopes_written_down() -> None:
    """Each Web API method workers/ calls has a row in METHOD_SCOPES (a new call needs its
    scopes looked up, and the manifest changed with it)."""
    called = methods_called(workers_sources())
    assert "chat.postMessage" in called, "the scan found no post: it is not reading workers/"
    missing = {m: where for m, where in called.items() if m not in METHOD_SCOPES}
    assert not missing, f"Web API methods with no scopes in METHOD_SCOPES: {missing}"
    unused = sorted(set(METHOD_SCOPES) - set(called))
    assert not unused, f"METHOD_SCOPES lists methods workers/ no longer calls: {unused}"


def test_the_manifest_asks_for_exactly_the_scopes_seatwire_uses() -> None:
    """The bot scopes are the union of the called methods' scopes and the events' scopes:
    nothing missing (a call would fail `missing_scope`), nothing extra."""
    called = methods_called(workers_sources())
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    needed = set().union(*(METHOD_SCOPES[m] for m in called)) | {EVENT_SCOPES[e] for e in events}
    scopes = manifest()["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes)), f"a scope is listed twice: {scopes}"
    assert set(scopes) == needed, (
        f"missing {sorted(needed - set(scopes))}, not used {sorted(set(scopes) - needed)}"
    )
    assert "user" not in manifest()["oauth_config"]["scopes"], "Seatwire needs no user token"


def test_each_scope_says_why_it_is_there() -> None:
    """Every bot scope in the manifest has a comment on the line above it."""
    lines = MANIFEST.read_text().splitlines()
    scopes = manifest()["oauth_config"]["scopes"]["bot"]
    for scope in scopes:
        at = lines.index(f"      - {scope}")
        assert lines[at - 1].strip().startswith("# "), f"{scope} has no comment saying why"


def test_the_manifest_subscribes_to_the_events_the_normaliser_reads() -> None:
    """The bot events are one message subscription per conversation type the Slack normaliser
    knows, plus every other event type it accepts (app_mention)."""
    expected = {MESSAGE_SUBSCRIPTION[t] for t in CHANNEL_TYPES} | (MESSAGE_EVENTS - {"message"})
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    assert sorted(events) == sorted(expected)


def test_the_request_urls_are_the_ingress_slack_routes_and_socket_mode_is_off() -> None:
    """Both request URLs are https on one host: the events' on the path the ingress serves
    Slack's events at, the interactivity's (on: an ask's buttons) on its interactions route;
    socket mode is off (the ingress has no socket)."""
    routes = {
        node.args[1].id: node.args[0].value
        for node in ast.walk(ast.parse((ROOT / "workers" / "ingress" / "app.py").read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_route"
        and len(node.args) >= 2
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[1], ast.Name)
    }
    url = urlsplit(str(manifest()["settings"]["event_subscriptions"]["request_url"]))
    assert url.scheme == "https"
    assert url.path == routes["slack_events"]
    interactivity = manifest()["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    clicks = urlsplit(str(interactivity["request_url"]))
    assert (clicks.scheme, clicks.netloc) == ("https", url.netloc)
    assert clicks.path == routes["slack_interactions"]
    assert manifest()["settings"]["socket_mode_enabled"] is False


def test_the_readme_names_every_github_event_the_normaliser_reads() -> None:
    """docs/security.md's GitHub webhook setup selects each event SUPPORTED reads, by GitHub's name
    for it, and points the hook at the ingress's GitHub route."""
    events = {event for event, _action in SUPPORTED}
    assert events == set(GITHUB_EVENT_LABELS), "a GitHub event has no label in this test"
    readme = (ROOT / "docs" / "security.md").read_text()
    rest = readme.split("\n### Setting up Slack and GitHub\n", 1)[1]
    section = " ".join(re.split(r"\n#{2,3} ", rest, maxsplit=1)[0].split())
    for event in sorted(events):
        assert f"*{GITHUB_EVENT_LABELS[event]}*" in section, GITHUB_EVENT_LABELS[event]
    assert "/webhooks/github" in section and "GITHUB_WEBHOOK_SECRET" in section
    assert "deploy/slack/manifest.yaml" in section and "SLACK_SIGNING_SECRET" in section
