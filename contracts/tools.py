"""The inputs of a seat's coordination tools (issue 13, project-tools.json; docs/tools.md),
as pydantic models that accept exactly what those input schemas accept
(`contracts/tool_schemas.py`). Pure data.

Field names are those of the input schemas (snake_case, as the tools take them). Unknown
fields are refused where the schema says `additionalProperties: false` (record_work_intent,
open_decision) and ignored elsewhere, as a JSON Schema validator would. JSON Schema's
`integer` is a number without a fraction (7.0 is 7; never a boolean); its strings are not
coerced from numbers. `ToolError` is how any tool refuses (the pure rules raise it too).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr

MAX_SAFE = 9_007_199_254_740_991


def _integral(value: object) -> object:
    """JSON Schema's `integer` is any number with no fraction: 7.0 is 7 (a boolean is not)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# JSON Schema's integer: an int, or a float with no fraction; never a bool or a numeric string.
Integer = Annotated[StrictInt, BeforeValidator(_integral)]
Cursor = Annotated[StrictStr, Field(max_length=1000)]
RequestId = Annotated[StrictStr, Field(pattern=r"^[\w-]{1,64}$")]
DecisionRequestId = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
IssueNumber = Annotated[Integer, Field(gt=0, le=MAX_SAFE)]
DirectionId = Annotated[StrictStr, Field(pattern=r"^[a-f0-9]{64}$")]


class ToolError(Exception):
    """A refused call: `code` (stable), `message` (what is wrong and how to fix it), the
    `field` it is about, the HTTP `status`, and any facts the caller needs (`extra`)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        status: int = 400,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status = status
        self.extra = extra

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return {**body, **self.extra}


class ToolInput(BaseModel):
    """A tool's arguments: unknown ones ignored (the tool's input schema allows them)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ClosedToolInput(BaseModel):
    """A tool's arguments where the tool's input schema refuses any other field."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class GetProject(ToolInput):
    pass


class FindWork(ToolInput):
    kind: Literal["issue", "pull_request", "milestone"] = "issue"
    state: Literal["open", "closed"] = "open"
    label: Annotated[StrictStr, Field(min_length=1, max_length=100)] | None = None
    milestone: Annotated[Integer, Field(gt=0, le=MAX_SAFE)] | None = None
    cursor: Cursor | None = None


class FindAgents(ToolInput):
    name_prefix: Annotated[StrictStr, Field(max_length=100)] | None = None
    cursor: Cursor | None = None


class GetUpdates(ToolInput):
    ack: Annotated[Integer, Field(ge=0, le=MAX_SAFE)] | None = None


class SendMessage(ToolInput):
    to: list[StrictStr]
    body: StrictStr
    thread_id: StrictStr | None = None
    client_message_id: StrictStr


class ReadThread(ToolInput):
    thread_id: StrictStr
    cursor: Cursor | None = None
    after_message_id: Annotated[StrictStr, Field(max_length=100)] | None = None


class GetIssueCoordination(ToolInput):
    issue_number: IssueNumber
    cursor: Cursor | None = None


class CoordinateIssue(ToolInput):
    issue_number: IssueNumber
    action: Literal["claim", "refresh", "release", "join", "leave", "follow", "unfollow", "report"]
    client_request_id: RequestId
    expected_generation: Annotated[Integer, Field(gt=0, le=MAX_SAFE)] | None = None
    work_state: Literal["working", "waiting", "blocked", "paused", "done"] | None = None
    blocker: Annotated[StrictStr, Field(max_length=500)] | None = None


class RecordWorkIntent(ClosedToolInput):
    intent_id: RequestId
    client_request_id: RequestId
    expected_revision: Annotated[Integer, Field(ge=0, le=MAX_SAFE - 1)]
    state: Literal["runnable", "waiting", "blocked", "done", "cancelled"]
    next_step: Annotated[StrictStr, Field(min_length=1, max_length=2000)]
    issue_number: IssueNumber | None = None
    blocker: Annotated[StrictStr, Field(min_length=1, max_length=500)] | None = None


class ListWorkIntents(ToolInput):
    cursor: Cursor | None = None
    include_completed: StrictBool | None = None


class OpenDecision(ClosedToolInput):
    client_request_id: DecisionRequestId
    title: Annotated[StrictStr, Field(min_length=1, max_length=160)]
    body: Annotated[StrictStr, Field(min_length=1, max_length=2000)]
    countdown_seconds: Annotated[Integer, Field(gt=0, le=31_536_000)]
    affected_issues: Annotated[list[IssueNumber], Field(max_length=20)] = Field(
        default_factory=list
    )


class Vote(ToolInput):
    direction_id: DirectionId
    client_request_id: DecisionRequestId
    expected_revision: Annotated[Integer, Field(ge=0, le=MAX_SAFE - 1)]
    option: Annotated[Integer, Field(ge=0, le=1)]
    reason: Annotated[StrictStr, Field(max_length=280)] = ""


class GetDecision(ToolInput):
    direction_id: DirectionId


class ListDecisions(ToolInput):
    cursor: Annotated[StrictStr, Field(max_length=500)] | None = None


class DecideDirection(ToolInput):
    direction_id: DirectionId
    client_request_id: DecisionRequestId
    expected_revision: Annotated[Integer, Field(gt=0, le=MAX_SAFE - 1)]
    action: Literal["resolve_tie", "approve", "reject"]
    option: Annotated[Integer, Field(ge=0, le=1)] | None = None
    reason: Annotated[StrictStr, Field(min_length=1, max_length=500)]


class ListAsks(ToolInput):
    state: Literal["open", "pending", "snoozed", "escalated", "answered", "closed"] | None = None
    cursor: Cursor | None = None


class GetAsk(ToolInput):
    ask_id: Annotated[StrictStr, Field(min_length=1, max_length=500)]


TOOL_INPUTS: dict[str, type[BaseModel]] = {
    "get_project": GetProject,
    "find_work": FindWork,
    "find_agents": FindAgents,
    "get_updates": GetUpdates,
    "send_message": SendMessage,
    "read_thread": ReadThread,
    "get_issue_coordination": GetIssueCoordination,
    "coordinate_issue": CoordinateIssue,
    "record_work_intent": RecordWorkIntent,
    "list_work_intents": ListWorkIntents,
    "open_decision": OpenDecision,
    "vote": Vote,
    "get_decision": GetDecision,
    "list_decisions": ListDecisions,
    "decide_direction": DecideDirection,
}

# Seatwire's own tools beyond the fifteen project tools (contracts/tool_schemas.py
# EXTRA_TOOL_NAMES).
EXTRA_TOOL_INPUTS: dict[str, type[BaseModel]] = {
    "list_asks": ListAsks,
    "get_ask": GetAsk,
}
SERVED_TOOL_INPUTS: dict[str, type[BaseModel]] = {**TOOL_INPUTS, **EXTRA_TOOL_INPUTS}
