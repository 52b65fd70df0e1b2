"""Settings refuse what is wrong, in one line that names the variable and the fix: an unknown
SEATWIRE_* variable (with the closest known one), a key a JSON setting's model does not have,
JSON that does not parse (with its position), a value of the wrong type."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from contracts import Org
from workers.cli import cli
from workers.errors import ConfigError
from workers.org import _YAML_LOADER, load_org
from workers.settings import (
    BUNDLED_ORG,
    OTHER_VARIABLES,
    load_settings,
    masked,
    scrubbed,
    unknown_variables,
)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("SEATWIRE_") and key not in OTHER_VARIABLES:
            monkeypatch.delenv(key)


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        (
            "SEATWIRE_REDIS_ULR",
            "SEATWIRE_REDIS_ULR is not a Seatwire setting; did you mean SEATWIRE_REDIS_URL?",
        ),
        (
            "SEATWIRE_LIMITS__PER_TARGET_PR_DAY",
            "SEATWIRE_LIMITS__PER_TARGET_PR_DAY is not a "
            "field of SEATWIRE_LIMITS; did you mean SEATWIRE_LIMITS__PER_TARGET_PER_DAY?",
        ),
        ("SEATWIRE_QWERTY", "SEATWIRE_QWERTY is not a Seatwire setting"),
    ],
)
def test_an_unknown_variable_is_refused_with_the_closest_known_one(
    monkeypatch: pytest.MonkeyPatch, variable: str, expected: str
) -> None:
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == expected
    result = runner.invoke(cli, ["demo"])
    assert result.exit_code == 2 and variable in " ".join(result.output.split())


def test_settings_aliases_and_an_agents_turn_variables_are_known() -> None:
    """Every variable a setting reads (its aliases too), and what a launcher hands an agent
    for its turn (an agent that runs `seatwire mcp` has them set), pass."""
    environ = {
        "SEATWIRE_REDIS_URL": "redis://h/0",
        "SEATWIRE_SLACK_BOT_TOKEN": "xoxb-1",
        "SEATWIRE_LIMITS__PER_TARGET_PER_DAY": "2",
        "SEATWIRE_SEND_POLICY__MAX_BODY_CHARS": "2000",
        "SEATWIRE_TASK_EVENTS": "false",
        **dict.fromkeys(OTHER_VARIABLES, "x"),
    }
    assert unknown_variables(environ) == []


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "SEATWIRE_LIMITS",
            '{"perTargetPerDay": 2',
            "SEATWIRE_LIMITS is not valid JSON: "
            "Expecting ',' delimiter at line 1 column 22 (character 21)",
        ),
        (
            "SEATWIRE_LIMITS",
            '{"perTargetPerDya": 2}',
            "SEATWIRE_LIMITS: unknown key 'perTargetPerDya' (did you mean 'perTargetPerDay'?)",
        ),
        (
            "SEATWIRE_SEND_POLICY",
            '{"maxBodyChar": 9}',
            "SEATWIRE_SEND_POLICY: unknown key 'maxBodyChar' (did you mean 'maxBodyChars'?)",
        ),
        (
            "SEATWIRE_LIMITS",
            '{"perTargetPerDay": "many"}',
            "SEATWIRE_LIMITS (perTargetPerDay): "
            "Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            "SEATWIRE_TASK_TIME_LIMIT_S",
            "soon",
            "SEATWIRE_TASK_TIME_LIMIT_S: Input should be a "
            "valid integer, unable to parse string as an integer",
        ),
    ],
)
def test_a_bad_value_names_its_variable_and_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == expected


ORG_WITH_BAD_REFERENCES = """\
members:
  - {id: ava}
  - id: ben
    supervisorId: gsu
channels:
  - {id: C1, memberIds: [ava, bne]}
seats:
  - memberId: ben
    operatorId: avaa
objectives:
  - {key: k, metric: m, target: 1, ownerId: zed}
"""


def test_every_org_reference_that_names_nobody_is_refused_at_its_line(tmp_path: Path) -> None:
    """A supervisorId, operatorId, channel member or objective owner naming nobody is refused
    when the org file is loaded, every one of them at once, each at its line and field, with
    the member id it most likely meant."""
    path = tmp_path / "org.yaml"
    path.write_text(ORG_WITH_BAD_REFERENCES)
    with pytest.raises(ConfigError) as refused:
        load_org(path)
    assert str(refused.value).splitlines() == [
        f"{path}:4: members.1.supervisorId: 'gsu' is not a member of the org",
        f"{path}:6: channels.0.memberIds.1: 'bne' is not a member of the org; did you mean 'ben'?",
        f"{path}:9: seats.0.operatorId: 'avaa' is not a member of the org; did you mean 'ava'?",
        f"{path}:11: objectives.0.ownerId: 'zed' is not a member of the org",
    ]
    as_json = tmp_path / "org.json"
    as_json.write_text(json.dumps(yaml.safe_load(ORG_WITH_BAD_REFERENCES)))
    with pytest.raises(ConfigError, match=r"org\.json: members\.1\.supervisorId: 'gsu'"):
        load_org(as_json)


@pytest.mark.parametrize("org_file", ["bundled", "flow style"])
def test_the_org_file_reads_as_pure_python_yaml_reads_it(org_file: str, tmp_path: Path) -> None:
    """The org file is read with libyaml's loader (a tenth of the time): the org it gives is
    the one PyYAML's own loader gives (the bundled file; a small one in flow style, its
    references mended)."""
    path = BUNDLED_ORG
    if org_file == "flow style":
        path = tmp_path / "org.yaml"
        mended = {"avaa": "ava", "bne": "ben", "gsu": "ava", "zed": "ava"}
        text = ORG_WITH_BAD_REFERENCES
        for wrong, right in mended.items():
            text = text.replace(wrong, right)
        path.write_text(text)
    assert _YAML_LOADER.__name__ == "CSafeLoader"  # PyYAML's wheels are built with libyaml
    assert load_org(path) == Org.model_validate(yaml.load(path.read_text(), yaml.SafeLoader))


def test_a_command_refuses_the_org_file_in_one_line_per_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "org.yaml"
    path.write_text(ORG_WITH_BAD_REFERENCES)
    monkeypatch.setenv("SEATWIRE_ORG_FILE", str(path))
    done = runner.invoke(cli, ["up"])
    assert done.exit_code == 2
    assert f"{path}:4: members.1.supervisorId: 'gsu' is not a member of the org\n" in done.output


@pytest.mark.parametrize("command", ["up", "worker"])
def test_up_and_worker_refuse_a_redis_that_does_not_answer_without_its_password(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SEATWIRE_REDIS_URL", f"redis://:s3cret-pw@127.0.0.1:{port}/0")
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    done = runner.invoke(cli, [command])
    assert done.exit_code == 2, done.output
    assert f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0" in done.output
    assert "s3cret-pw" not in done.output


def test_up_refuses_a_separate_broker_that_does_not_answer(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SEATWIRE_REDIS_URL", redis_url)
    monkeypatch.setenv("SEATWIRE_BROKER_URL", f"amqp://u:pw-x9@127.0.0.1:{port}//")
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    done = runner.invoke(cli, ["up"])
    assert done.exit_code == 2, done.output
    assert f"cannot reach the broker at amqp://u:***@127.0.0.1:{port}//" in done.output
    assert "pw-x9" not in done.output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://user:s3cret@host/0", "redis://user:***@host/0"),
        (
            "https://hooks.example.com/in?token=s3cret&team=a",
            "https://hooks.example.com/in?token=***&team=a",
        ),
        ("https://hooks.example.com/in?api_key=s3cret", "https://hooks.example.com/in?api_key=***"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_a_printed_url_never_shows_a_secret(url: str, shown: str) -> None:
    assert masked(url) == shown
    # A driver's error that quotes the URL is printed with the same secrets hidden.
    assert scrubbed(f"could not connect to {url}: refused", url) == (
        f"could not connect to {shown}: refused"
    )


@pytest.mark.parametrize(
    "url",
    [
        "redis://:ab/cd@redis:6379/0",
        "redis://user:ab?cd@redis:6379/0",
        "redis://:ab#cd@redis:6379/0",
    ],
)
def test_a_password_that_ends_the_host_part_early_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """Given a Redis URL whose password holds an unencoded '/', '?' or '#' (the driver would
    take what follows for the path and reach another host; a masked print would show the
    password's tail), when the settings load, then they are refused naming the variable and
    the fix, and no part of the password is in the refusal."""
    monkeypatch.setenv("SEATWIRE_REDIS_URL", url)
    monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith("SEATWIRE_REDIS_URL: the URL has an '@' after its host part")
    assert "percent-encode" in message and "ab" not in message and "cd" not in message


def test_a_percent_encoded_or_at_holding_password_is_taken_and_printed_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A password percent-encoded, or holding an '@' (the host is what follows the last
    one), is a valid URL, printed with the password masked."""
    for url, shown in (
        ("redis://:ab%2Fcd@redis:6379/0", "redis://:***@redis:6379/0"),
        ("redis://:ab@cd@redis:6379/0", "redis://:***@redis:6379/0"),
    ):
        monkeypatch.setenv("SEATWIRE_REDIS_URL", url)
        monkeypatch.setenv("SEATWIRE_API_TOKEN", "t")
        assert masked(load_settings().redis_url) == shown
