"""The `seatwire` command: the demo a newcomer runs failing when a case ends otherwise (its
full run: tests/workers/test_demo_run.py), the schema export, and refusals of bad
configuration at start rather than at the first report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from workers.cli import cli
from workers.demo import run_demo
from workers.errors import ConfigError
from workers.org import load_org
from workers.settings import Settings

runner = CliRunner()


def test_the_demo_exits_non_zero_when_a_controller_case_ends_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relay seat whose launcher works never escalates: the case ends otherwise and the
    demo says so and fails."""
    from workers.demo import controller as controller_demo

    monkeypatch.setattr(controller_demo, "RELAY_PROGRAM", "pass")
    monkeypatch.chdir(tmp_path)
    console = Console(record=True, width=80)
    assert run_demo(Settings(), console) == 1
    text = " ".join(console.export_text().split())
    assert "check: NOT as expected: expected 3 failures; stop: failure_limit; 1 ask to ava" in text
    assert "of 39 as expected; the demo exits with status 1" in text


def test_the_demo_exits_non_zero_when_a_steward_case_ends_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the trial-activation sample measured (not an `llm` estimate) the honesty gate
    lets its candidate through, the case ends differently, and the demo says so and fails."""
    from workers.demo import steward as steward_demo

    honest = steward_demo.samples

    def measured(now_ms: int) -> list[tuple[str, dict[str, object]]]:
        return [
            (key, {**body, "source": "method"} if key == "trial-activation" else body)
            for key, body in honest(now_ms)
        ]

    monkeypatch.setattr(steward_demo, "samples", measured)
    monkeypatch.chdir(tmp_path)
    console = Console(record=True, width=80)
    assert run_demo(Settings(), console) == 1
    text = " ".join(console.export_text().split())
    assert "outcome: rejected at nothing, 1 dispatched" in text
    assert "check: NOT as expected: expected rejected at honesty, nothing dispatched" in text
    assert "38 of 39 as expected; the demo exits with status 1" in text


def test_schema_prints_every_contract() -> None:
    """`seatwire schema` prints the JSON Schema of each contract, camelCase on the wire."""
    result = runner.invoke(cli, ["schema"])
    assert result.exit_code == 0, result.output
    schemas = json.loads(result.output)
    assert {
        "Member",
        "Channel",
        "Seat",
        "WorkReport",
        "EngagementDecision",
        "Target",
        "GuardrailVerdict",
        "LedgerRow",
    } <= set(schemas)
    assert "selfServeExhausted" in schemas["WorkReport"]["properties"]
    assert schemas["WorkReport"]["additionalProperties"] is False


def test_worker_refuses_to_start_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A separate worker without a shared broker is refused with the reason."""
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)
    result = runner.invoke(cli, ["worker", "--queues", "send"])
    assert result.exit_code == 2 and "SEATWIRE_REDIS_URL" in result.output


def test_real_redis_without_token_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pointing at a real Redis without an API token is a configuration error at start."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", "redis://127.0.0.1:6379/13")
    monkeypatch.delenv("SEATWIRE_API_TOKEN", raising=False)
    result = runner.invoke(cli, ["ingress"])
    assert result.exit_code == 2 and "SEATWIRE_API_TOKEN" in result.output


def test_unknown_queue_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker asked for a queue that does not exist says which ones do."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", "redis://127.0.0.1:6379/13")
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    result = runner.invoke(cli, ["worker", "--queues", "engagment"])
    assert result.exit_code == 2 and "engagment" in result.output


def test_bad_org_file_names_the_field(tmp_path: Path) -> None:
    """An invalid org file is refused at load with the path of the wrong field."""
    bad = tmp_path / "org.yaml"
    bad.write_text("members:\n  - {id: ava, status: active}\n  - {displayName: nobody}\n")
    with pytest.raises(ConfigError, match=r"members\.1\.id"):
        load_org(bad)
    bad.write_text("members: [{id: ava}]\nseats: [{memberId: ghost}]\n")
    with pytest.raises(ConfigError, match=r"seats\.0\.memberId"):
        load_org(bad)
    bad.write_text("members: [{id: ava}]\nchanels: []\n")
    with pytest.raises(ConfigError, match="chanels"):
        load_org(bad)
    bad.write_text("members: [{id: ava, onws: [billing]}]\n")
    with pytest.raises(ConfigError, match=r"members\.0\.onws"):
        load_org(bad)


def test_visibility_timeout_must_exceed_task_and_retry_time() -> None:
    """A visibility timeout the broker would redeliver running tasks under is refused."""
    with pytest.raises(ConfigError, match="visibility_timeout"):
        Settings(visibility_timeout_s=300).check()


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"SEATWIRE_OUTBOUND": "carrier-pigeon"}, "SEATWIRE_OUTBOUND: Input should be"),
        ({"SEATWIRE_OUTBOUND": "slack"}, "SEATWIRE_SLACK_BOT_TOKEN"),
        ({"SEATWIRE_OUTBOUND": "webhook"}, "SEATWIRE_WEBHOOK_URL"),
        (
            {"SEATWIRE_OUTBOUND": "webhook", "SEATWIRE_WEBHOOK_URL": "https://h.example/x"},
            "SEATWIRE_WEBHOOK_SECRET",
        ),
        ({"SEATWIRE_SEND_MODE": "loud"}, "SEATWIRE_SEND_MODE: Input should be"),
    ],
)
def test_bad_outbound_configuration_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, env: dict[str, str], said: str
) -> None:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    for name in ("SEATWIRE_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN", "SEATWIRE_WEBHOOK_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(cli, ["worker", "--queues", "send"])
    assert result.exit_code == 2 and said in result.output


def test_a_slack_api_nobody_answers_at_is_refused_before_the_first_ask(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    from workers.embedded import free_port

    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    monkeypatch.setenv("SEATWIRE_OUTBOUND", "slack")
    monkeypatch.setenv("SEATWIRE_SLACK_BOT_TOKEN", "xoxb-1-2-3")
    monkeypatch.setenv("SEATWIRE_SLACK_API_URL", f"http://127.0.0.1:{free_port()}/api/")
    result = runner.invoke(cli, ["worker", "--queues", "send"])
    assert result.exit_code == 2 and "cannot reach the Slack API" in result.output


def test_a_wrong_slack_token_is_refused_before_the_first_ask(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    from tests.fake_slack import FakeSlack

    with FakeSlack() as slack:
        monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
        monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
        monkeypatch.setenv("SEATWIRE_OUTBOUND", "slack")
        monkeypatch.setenv("SEATWIRE_SLACK_BOT_TOKEN", "xoxb-not-the-one")
        monkeypatch.setenv("SEATWIRE_SLACK_API_URL", slack.url)
        result = runner.invoke(cli, ["worker", "--queues", "send"])
    assert result.exit_code == 2 and "invalid_auth" in result.output


# --------------------------------------------------------------------------- the command itself


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["worker", "-h"], ["dlq", "list", "-h"]])
def test_help_answers_to_h_on_every_command(args: list[str]) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 0 and "Usage:" in result.output


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"seatwire {version('seatwire')}"


@pytest.mark.parametrize(
    ("option", "value", "choices"),
    [("--pool", "forked", "'prefork', 'threads', 'solo'"), ("--loglevel", "loud", "'debug'")],
)
def test_a_mistyped_choice_is_refused_in_a_few_lines_naming_the_choices(
    option: str, value: str, choices: str
) -> None:
    """No traceback: exit 2 and the error names the value and what would do."""
    result = runner.invoke(cli, ["worker", option, value])
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())  # the error's box, unwrapped
    assert f"'{value}' is not one of" in text and choices in text
    assert "Traceback" not in result.output and len(result.output.splitlines()) < 10


def test_worker_passes_celery_options_after_the_double_dash_through(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    """What follows `--` reaches Celery's worker untouched, after Seatwire's own options;
    a choice given in any case is Celery's spelling."""
    from celery import Celery

    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    seen: list[list[str]] = []
    monkeypatch.setattr(Celery, "worker_main", lambda self, argv: seen.append(list(argv)))
    result = runner.invoke(
        cli,
        [
            *("worker", "--queues", "engagement", "--pool", "SOLO", "--loglevel", "debug"),
            *("--", "--max-memory-per-child", "200000", "-O", "fair"),
        ],
    )
    assert result.exit_code == 0, result.output
    [argv] = seen
    assert argv[argv.index("-P") + 1] == "solo" and argv[argv.index("--loglevel") + 1] == "DEBUG"
    assert argv[-4:] == ["--max-memory-per-child", "200000", "-O", "fair"]


def test_an_unreachable_redis_is_refused_without_printing_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SEATWIRE_REDIS_URL", "redis://:hunter2@127.0.0.1:1/0")
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    result = runner.invoke(cli, ["worker", "--queues", "engagement"])
    assert result.exit_code == 2 and "cannot reach Redis" in result.output
    assert "hunter2" not in result.output and ":***@127.0.0.1:1" in result.output


@pytest.mark.redis
@pytest.mark.parametrize(("setting", "expected"), [(None, 75), ("90", 90)])
def test_the_ingress_keeps_idle_connections_longer_than_its_clients_do(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, setting: str | None, expected: int
) -> None:
    """uvicorn closes an idle connection after 5 s by default, as httpx forgets one: a request
    sent as the server closes meets a reset. The ingress keeps them SEATWIRE_KEEP_ALIVE_S."""
    import uvicorn

    ran: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: ran.update(kw))
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    if setting is not None:
        monkeypatch.setenv("SEATWIRE_KEEP_ALIVE_S", setting)
    done = runner.invoke(cli, ["ingress", "--port", "1"])
    assert done.exit_code == 0, done.output
    assert ran["timeout_keep_alive"] == expected


@pytest.mark.parametrize("command", [["demo"], ["up"]])
def test_embedded_mode_without_its_stand_in_is_a_clear_refusal(
    monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Where fakeredis is not installed (the production image), `seatwire demo` and `seatwire
    up` with no SEATWIRE_REDIS_URL exit 2 saying what to set or install, not with an
    ImportError's traceback."""
    monkeypatch.delenv("SEATWIRE_REDIS_URL", raising=False)
    monkeypatch.delenv("SEATWIRE_BROKER_URL", raising=False)
    monkeypatch.setitem(sys.modules, "fakeredis", None)  # `import fakeredis` fails
    result = runner.invoke(cli, command)
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, ImportError)
    text = " ".join(result.output.split())
    assert "embedded mode (no SEATWIRE_REDIS_URL) needs fakeredis" in text
    assert "set SEATWIRE_REDIS_URL" in text and "uv sync --group demo" in text
