"""A client generated from the ingress's OpenAPI document works (issue 15 point 4):
openapi-python-client generates a package from `/openapi.json`, and a seat reports its work
through it to the running app; the answers come back as the generated models, a refusal as
the generated `Problem`."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import redis
from fastapi import FastAPI

from tests.auth import seat_token
from tests.fakes import BLOCKED_REPORT
from workers import bootstrap
from workers.celery_app import create_app
from workers.ingress.app import create_ingress, tracking_id_for
from workers.settings import Settings
from workers.stores import keys

pytestmark = pytest.mark.e2e  # runs the generator as a process of its own

PACKAGE = "seatwire_generated_client"


@pytest.fixture
def ingress(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> FastAPI:
    settings = Settings(redis_url=redis_url, api_token="test-token", outbox_path=tmp_path / "o")
    celery = create_app(settings, register=False)
    return create_ingress(bootstrap.build_container(settings, app=celery), celery)


@pytest.fixture
def generated(ingress: FastAPI, tmp_path: Path) -> Iterator[ModuleType]:
    """The client package openapi-python-client generates from the app's document, imported."""
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(ingress.openapi()))
    config = tmp_path / "generator.json"
    config.write_text(json.dumps({"post_hooks": []}))  # no formatting pass: nobody reads it
    done = subprocess.run(
        [
            *(sys.executable, "-m", "openapi_python_client", "generate"),
            *("--path", str(document), "--config", str(config), "--meta", "none"),
            *("--output-path", str(tmp_path / PACKAGE)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # A warning means a part of the document the generator could not turn into code.
    assert done.returncode == 0 and "Warning" not in done.stdout, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def post_work(generated: ModuleType, app: FastAPI, token: str, body: dict[str, Any]) -> Any:
    """Post `body` as scout's work report through the generated client, against `app` in
    process (the app's lifespan around it, as a server would run it)."""
    api = importlib.import_module(f"{PACKAGE}.api.default.post_work")
    report = importlib.import_module(f"{PACKAGE}.models.work_report").WorkReport

    async def send() -> Any:
        client = generated.AuthenticatedClient(
            base_url="http://testserver",
            token=token,
            httpx_args={"transport": httpx.ASGITransport(app=app)},
        )
        async with app.router.lifespan_context(app), client:
            return await api.asyncio_detailed("scout", client=client, body=report.from_dict(body))

    return asyncio.run(send())


def test_a_generated_client_reports_work(
    generated: ModuleType, ingress: FastAPI, redis_client: redis.Redis
) -> None:
    """The generated client posts a work report; the 202 parses as the generated
    WorkAccepted, the report is journalled and enqueued; the same revision with other
    content parses as the generated Problem, naming the tracking id."""
    models = importlib.import_module(f"{PACKAGE}.models")
    token = seat_token(redis_client, "scout")
    tracking = tracking_id_for("scout", "billing-migration", 1)

    accepted = post_work(generated, ingress, token, dict(BLOCKED_REPORT))

    assert accepted.status_code == 202, accepted.content
    assert isinstance(accepted.parsed, models.WorkAccepted)
    assert accepted.parsed.tracking_id == tracking
    assert accepted.parsed.status == models.WorkAcceptedStatus.ACCEPTED
    entry = redis_client.hgetall(keys.journal(tracking))
    assert entry[b"state"] == b"accepted" and b"enqueuedAtMs" in entry

    changed = post_work(generated, ingress, token, {**BLOCKED_REPORT, "title": "Other"})

    assert changed.status_code == 409
    assert isinstance(changed.parsed, models.Problem)
    assert changed.parsed.error == "revision_reused"
    assert changed.parsed.additional_properties["trackingId"] == tracking
    assert redis_client.llen("engagement") == 1
