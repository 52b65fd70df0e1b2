"""Settings refuse what is wrong, in one line that names the variable and the fix: an unknown
SEATWIRE_* variable (with the closest known one), a key a JSON setting's model does not have,
JSON that does not parse (with its position), a value of the wrong type."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from workers.cli import cli
from workers.errors import ConfigError
from workers.settings import OTHER_VARIABLES, load_settings, unknown_variables

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
