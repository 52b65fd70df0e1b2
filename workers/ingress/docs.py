"""How the ingress's routes describe themselves in its OpenAPI document, so that a client can
be generated from it (issue 15 point 4).

The `/v1` writes read their raw bodies themselves (the size cap, 415, one error shape), so
FastAPI sees no body to document. Each says what it reads with `reads(Model)`: the
contract's JSON schema, in validation mode, as the operation's requestBody (FastAPI generates
it beside the answers' schemas, from `model_routes`, and `finish` points the body at it).
Each route lists every status it answers with
`answers(...)`: its 2xx bodies and its refusals, every refusal the one `Problem` body (with
Retry-After on a 429 and a 503, WWW-Authenticate on a 401). FastAPI's own 422 entry
(`HTTPValidationError`, a shape no route answers with) never reaches the document: a route
whose parameters can be refused lists the 422 itself (app.py answers FastAPI's
`RequestValidationError` as a `Problem`), and `finish` drops FastAPI's entry wherever a
route did not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from inspect import Parameter, Signature
from typing import Annotated, Any

from fastapi import Body
from fastapi.routing import APIRoute
from pydantic import BaseModel

from contracts.api import Problem

COMPONENTS = "#/components/schemas/"
MODEL_PATHS = "/openapi-models/"  # the paths of `model_routes`, dropped by `finish`

# What each refusal means wherever it is answered; a route names its own 404s and 409s.
REFUSALS: dict[int, str] = {
    400: "the request is not what the route reads",
    401: "no bearer token, or one nobody issued or that was revoked (`unauthorized`)",
    403: "a token of the wrong role or seat (`operator_only`, `seat_only`, `wrong_seat`)",
    404: "what the path names does not exist",
    409: "the request conflicts with what is already recorded",
    413: "the body is over the size limit (`body_too_large`)",
    415: "a content type other than application/json (`unsupported_media_type`)",
    422: "a field or parameter is wrong: `detail` names each",
    429: "the sender is over its rate limit (`rate_limited`): retry after Retry-After",
    501: "one of the project tools that Seatwire does not serve yet (`not_implemented`)",
    503: "a store or the broker is unavailable or over budget (`unavailable`): retry after "
    "Retry-After",
}
RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before retrying",
        "required": True,
        "schema": {"type": "string"},
    }
}
HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {
            "description": "the scheme to authenticate with",
            "required": True,
            "schema": {"type": "string"},
        }
    },
    429: RETRY_AFTER,
    503: RETRY_AFTER,
}

# The refusals every `/v1` route can answer: its token (401, 403) and its stores (503).
GUARDED = (401, 403, 503)
# ... and every `/v1` write that reads a JSON body with `read_json`.
BODY = (413, 415, 422, 429)

# The request models the routes read, by component name (filled by `reads`).
REQUEST_MODELS: dict[str, type[BaseModel]] = {}


def reads(
    model: type[BaseModel], *, required: bool = True, description: str | None = None
) -> dict[str, Any]:
    """A route's `openapi_extra`: its JSON body is `model` (`required=False`: an empty body is
    read as `{}`)."""
    name = model.__name__
    known = REQUEST_MODELS.setdefault(name, model)
    if known is not model:
        raise ValueError(f"two request models are named {name}: {known} and {model}")
    body: dict[str, Any] = {
        "required": required,
        "content": {"application/json": {"schema": {"$ref": COMPONENTS + name}}},
    }
    if description is not None:
        body["description"] = description
    return {"requestBody": body}


def answers(
    ok: Mapping[int, type[BaseModel] | tuple[type[BaseModel], str]],
    *refusals: int,
    why: Mapping[int, str] | None = None,
) -> dict[int | str, dict[str, Any]]:
    """A route's `responses`: each 2xx with its model (and a description when the route has
    more than one), then each refusal as a `Problem`, described by `why` or by REFUSALS."""
    found: dict[int | str, dict[str, Any]] = {}
    for status, given in ok.items():
        model, text = given if isinstance(given, tuple) else (given, None)
        found[status] = {"model": model, **({"description": text} if text else {})}
    for status in sorted(set(refusals)):
        answer: dict[str, Any] = {
            "model": Problem,
            "description": (why or {}).get(status, REFUSALS[status]),
        }
        if status in HEADERS:
            answer["headers"] = HEADERS[status]
        found[status] = answer
    return found


def finish(document: dict[str, Any]) -> dict[str, Any]:
    """The document generated over `routes + model_routes(...)`, with the model routes'
    paths gone, each `reads` body pointed at the schema FastAPI named for it, and FastAPI's
    unused 422 entries and their schemas gone (in place)."""
    paths: dict[str, Any] = document["paths"]
    named: dict[str, Any] = {}
    for path in [p for p in paths if p.startswith(MODEL_PATHS)]:
        read = paths.pop(path)["post"].get("requestBody")
        if read is not None:
            named[COMPONENTS + path.removeprefix(MODEL_PATHS)] = read["content"]["application/json"]
    for operation in (o for methods in paths.values() for o in methods.values()):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        if body.get("schema", {}).get("$ref") in named:
            body["schema"] = named[body["schema"]["$ref"]]["schema"]
        responses = operation.get("responses", {})
        invalid = responses.get("422", {}).get("content", {}).get("application/json", {})
        if invalid.get("schema", {}).get("$ref") == COMPONENTS + "HTTPValidationError":
            del responses["422"]
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name.endswith(("-Input", "-Output")):  # a model read and answered differently
            schema["title"] = name.replace("-", "")  # a generated client's class names
    for unused in ("HTTPValidationError", "ValidationError"):
        if f'"{COMPONENTS}{unused}"' not in json.dumps(document):
            schemas.pop(unused, None)
    return document


def operation_id(route: APIRoute) -> str:
    """An operation's id, and a generated client's function name: its route's (unique)."""
    return route.name


def model_routes(answered: tuple[type[BaseModel], ...] = ()) -> list[APIRoute]:
    """One route for the document's generation only (never mounted) per model a `reads` body
    names, and per model in `answered` (the answers of routes FastAPI does not list): FastAPI
    then generates their schemas beside the routes' own, in the right mode, one name where a
    model reads and answers alike and `-Input`/`-Output` where it does not."""
    routes = [_route(name, model, read=True) for name, model in REQUEST_MODELS.items()]
    routes += [_route(m.__name__, m, read=False) for m in answered]
    return routes


def _route(name: str, model: type[BaseModel], *, read: bool) -> APIRoute:
    async def endpoint(**_: Any) -> None:
        return None

    if read:
        body = Parameter("body", Parameter.KEYWORD_ONLY, annotation=Annotated[model, Body()])
        endpoint.__signature__ = Signature([body])  # type: ignore[attr-defined]
        return APIRoute(MODEL_PATHS + name, endpoint, methods=["POST"])
    endpoint.__signature__ = Signature([])  # type: ignore[attr-defined]
    return APIRoute(
        MODEL_PATHS + "answer/" + name, endpoint, methods=["POST"], response_model=model
    )
