"""The tools' input models accept what their input schemas accept (JSON Schema draft 7)
and refuse the rest (issue 13). Pure."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.tool_schemas import INPUT_SCHEMAS, TOOL_NAMES
from contracts.tools import TOOL_INPUTS, CoordinateIssue, OpenDecision, RecordWorkIntent


def test_every_seed_tool_has_an_input_model_with_its_fields() -> None:
    """One model per tool, whose fields and required set are the schema's."""
    assert list(TOOL_INPUTS) == list(TOOL_NAMES)
    for name in TOOL_NAMES:
        schema, model = INPUT_SCHEMAS[name], TOOL_INPUTS[name]
        assert set(model.model_fields) == set(schema["properties"]), name
        required = {f for f, info in model.model_fields.items() if info.is_required()}
        assert required == set(schema.get("required", [])), name


@pytest.mark.parametrize("value", [7, 7.0])
def test_an_integer_is_a_number_without_a_fraction(value: object) -> None:
    """7 and 7.0 are the integer 7, as JSON Schema says."""
    args = {"issue_number": value, "action": "claim", "client_request_id": "r1"}
    assert CoordinateIssue.model_validate(args).issue_number == 7


@pytest.mark.parametrize("value", [True, 7.5, "7", 0, -1])
def test_what_is_not_a_positive_integer_is_refused(value: object) -> None:
    """A boolean, a fraction, a numeric string or a number out of range is refused."""
    with pytest.raises(ValidationError):
        CoordinateIssue.model_validate(
            {"issue_number": value, "action": "claim", "client_request_id": "r1"}
        )


def test_unknown_fields_are_refused_only_where_the_schema_closes_the_object() -> None:
    """record_work_intent and open_decision refuse unknown fields; other tools ignore them."""
    intent = {
        "intent_id": "i",
        "client_request_id": "r",
        "expected_revision": 0,
        "state": "runnable",
        "next_step": "go",
    }
    with pytest.raises(ValidationError):
        RecordWorkIntent.model_validate({**intent, "extra": 1})
    with pytest.raises(ValidationError):
        OpenDecision.model_validate(
            {
                "client_request_id": "r",
                "title": "t",
                "body": "b",
                "countdown_seconds": 60,
                "options": ["a", "b"],
            }
        )
    claim = {"issue_number": 1, "action": "claim", "client_request_id": "r", "extra": 1}
    assert CoordinateIssue.model_validate(claim).issue_number == 1
