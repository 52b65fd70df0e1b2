"""The input schemas of the seats' coordination tools (project-tools.json), exactly: what
`tools/list` answers with and what every tool call is validated against. Pure data.

The tool names and their `inputSchema` objects are those of project-tools.json, key for key
(a client generated against those tools works here unchanged). The descriptions a client
reads are Seatwire's own, in `workers/tools/`.

Beyond those fifteen, Seatwire serves tools of its own (`EXTRA_TOOL_NAMES`: a seat's
asks, issue 26), listed after them; `SERVED_TOOL_NAMES` and `SERVED_INPUT_SCHEMAS` are both
together, in the order `tools/list` answers. The fifteen stay exactly as project-tools.json
has them.
"""

from __future__ import annotations

from typing import Any, Final

TOOL_NAMES: Final[tuple[str, ...]] = (
    "get_project",
    "find_work",
    "find_agents",
    "get_updates",
    "send_message",
    "read_thread",
    "get_issue_coordination",
    "coordinate_issue",
    "record_work_intent",
    "list_work_intents",
    "open_decision",
    "vote",
    "get_decision",
    "list_decisions",
    "decide_direction",
)

INPUT_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "get_project": {"type": "object", "properties": {}},
    "find_work": {
        "type": "object",
        "properties": {
            "kind": {
                "default": "issue",
                "type": "string",
                "enum": ["issue", "pull_request", "milestone"],
            },
            "state": {"default": "open", "type": "string", "enum": ["open", "closed"]},
            "label": {"type": "string", "minLength": 1, "maxLength": 100},
            "milestone": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            "cursor": {"type": "string", "maxLength": 1000},
        },
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "find_agents": {
        "type": "object",
        "properties": {
            "name_prefix": {
                "description": "The start of the agent names to find.",
                "type": "string",
                "maxLength": 100,
            },
            "cursor": {
                "description": "The `next` value from the previous page.",
                "type": "string",
                "maxLength": 1000,
            },
        },
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "get_updates": {
        "type": "object",
        "properties": {
            "ack": {
                "description": "The `position` from your last call, once you "
                "have handled its items.",
                "type": "integer",
                "minimum": 0,
                "maximum": 9007199254740991,
            }
        },
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "send_message": {
        "type": "object",
        "properties": {
            "to": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'Agent ids. Agents of admins may pass ["project"] '
                "to send to the whole project.",
            },
            "body": {"type": "string", "description": "The text of the message."},
            "thread_id": {
                "description": "The id of the message you are replying to. "
                "Leave it out to start a new thread.",
                "type": "string",
            },
            "client_message_id": {
                "type": "string",
                "description": "An id you make up for this "
                "message: 1 to 64 letters, digits, "
                "hyphens or underscores.",
            },
        },
        "required": ["to", "body", "client_message_id"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "read_thread": {
        "type": "object",
        "properties": {
            "thread_id": {"type": "string", "description": "The id of any message in the thread."},
            "cursor": {
                "description": "The `next` value from the previous page.",
                "type": "string",
                "maxLength": 1000,
            },
            "after_message_id": {
                "description": "Read after this known message in "
                "creation-time/ID order in the same "
                "thread; new deliveries still use "
                "get_updates. Use without cursor; "
                "continue with next if returned.",
                "type": "string",
                "maxLength": 100,
            },
        },
        "required": ["thread_id"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "get_issue_coordination": {
        "type": "object",
        "properties": {
            "issue_number": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            "cursor": {"type": "string", "maxLength": 1000},
        },
        "required": ["issue_number"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "coordinate_issue": {
        "type": "object",
        "properties": {
            "issue_number": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            "action": {
                "type": "string",
                "enum": [
                    "claim",
                    "refresh",
                    "release",
                    "join",
                    "leave",
                    "follow",
                    "unfollow",
                    "report",
                ],
            },
            "client_request_id": {"type": "string", "pattern": "^[\\w-]{1,64}$"},
            "expected_generation": {
                "type": "integer",
                "exclusiveMinimum": 0,
                "maximum": 9007199254740991,
            },
            "work_state": {
                "type": "string",
                "enum": ["working", "waiting", "blocked", "paused", "done"],
            },
            "blocker": {"type": "string", "maxLength": 500},
        },
        "required": ["issue_number", "action", "client_request_id"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "record_work_intent": {
        "type": "object",
        "properties": {
            "intent_id": {"type": "string", "pattern": "^[\\w-]{1,64}$"},
            "client_request_id": {"type": "string", "pattern": "^[\\w-]{1,64}$"},
            "expected_revision": {"type": "integer", "minimum": 0, "maximum": 9007199254740990},
            "state": {
                "type": "string",
                "enum": ["runnable", "waiting", "blocked", "done", "cancelled"],
            },
            "next_step": {"type": "string", "minLength": 1, "maxLength": 2000},
            "issue_number": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            "blocker": {"type": "string", "minLength": 1, "maxLength": 500},
        },
        "required": ["intent_id", "client_request_id", "expected_revision", "state", "next_step"],
        "$schema": "http://json-schema.org/draft-07/schema#",
        "additionalProperties": False,
    },
    "list_work_intents": {
        "type": "object",
        "properties": {
            "cursor": {"type": "string", "maxLength": 1000},
            "include_completed": {"type": "boolean"},
        },
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "open_decision": {
        "type": "object",
        "properties": {
            "client_request_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "title": {"type": "string", "minLength": 1, "maxLength": 160},
            "body": {"type": "string", "minLength": 1, "maxLength": 2000},
            "countdown_seconds": {"type": "integer", "exclusiveMinimum": 0, "maximum": 31536000},
            "affected_issues": {
                "default": [],
                "maxItems": 20,
                "type": "array",
                "items": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
            },
        },
        "required": ["client_request_id", "title", "body", "countdown_seconds"],
        "$schema": "http://json-schema.org/draft-07/schema#",
        "additionalProperties": False,
    },
    "vote": {
        "type": "object",
        "properties": {
            "direction_id": {"type": "string", "pattern": "^[a-f0-9]{64}$"},
            "client_request_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "expected_revision": {"type": "integer", "minimum": 0, "maximum": 9007199254740990},
            "option": {"type": "integer", "minimum": 0, "maximum": 1},
            "reason": {"default": "", "type": "string", "maxLength": 280},
        },
        "required": ["direction_id", "client_request_id", "expected_revision", "option"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "get_decision": {
        "type": "object",
        "properties": {"direction_id": {"type": "string", "pattern": "^[a-f0-9]{64}$"}},
        "required": ["direction_id"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "list_decisions": {
        "type": "object",
        "properties": {"cursor": {"type": "string", "maxLength": 500}},
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "decide_direction": {
        "type": "object",
        "properties": {
            "direction_id": {"type": "string", "pattern": "^[a-f0-9]{64}$"},
            "client_request_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "expected_revision": {
                "type": "integer",
                "exclusiveMinimum": 0,
                "maximum": 9007199254740990,
            },
            "action": {"type": "string", "enum": ["resolve_tie", "approve", "reject"]},
            "option": {"type": "integer", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "minLength": 1, "maxLength": 500},
        },
        "required": ["direction_id", "client_request_id", "expected_revision", "action", "reason"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
}

# A seat's asks (issue 26): what became of what it asked, and the answers.
ASK_STATES: Final[tuple[str, ...]] = (
    "open",
    "pending",
    "snoozed",
    "escalated",
    "answered",
    "closed",
)
EXTRA_TOOL_NAMES: Final[tuple[str, ...]] = ("list_asks", "get_ask")
EXTRA_INPUT_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "list_asks": {
        "type": "object",
        "properties": {
            "state": {
                "description": "Only asks in this state; `open` is every ask still waiting "
                "(pending, open, snoozed or escalated).",
                "type": "string",
                "enum": list(ASK_STATES),
            },
            "cursor": {
                "description": "The `next` value from the previous page.",
                "type": "string",
                "maxLength": 1000,
            },
        },
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "get_ask": {
        "type": "object",
        "properties": {
            "ask_id": {
                "description": "The id of one of your asks (`askId` of an ask_answered update, "
                "or `id` from list_asks).",
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
            }
        },
        "required": ["ask_id"],
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
}

SERVED_TOOL_NAMES: Final[tuple[str, ...]] = (*TOOL_NAMES, *EXTRA_TOOL_NAMES)
SERVED_INPUT_SCHEMAS: Final[dict[str, dict[str, Any]]] = {**INPUT_SCHEMAS, **EXTRA_INPUT_SCHEMAS}

# Every tool (the fifteen and Seatwire's own) runs to completion in its call: none is an MCP
# task.
EXECUTION: Final[dict[str, Any]] = {"taskSupport": "forbidden"}
