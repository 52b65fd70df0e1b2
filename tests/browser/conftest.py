"""Fixtures of the console's browser tests: the ingress started as its own process (on a
free local port, on the test Redis, stopped by its process group afterwards) and Debian's
chromium, headless, driven by Playwright.

Without chromium at /usr/bin/chromium the tests skip, saying so; under CI=true they fail
(.ci/run installs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Browser, sync_playwright

from bench.chaos import wait_ingress
from tests.e2e.cluster import stop_processes
from workers import bootstrap
from workers.container import Container
from workers.embedded import free_port
from workers.settings import REPO_ROOT, Settings
from workers.stages.links import AnswerLinks

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "browser-operator-token"
SECRET = "browser-link-secret"
ARTIFACTS = REPO_ROOT / ".pytest-artifacts" / "console"
ORG = """
members: [{id: ava}, {id: ben}, {id: gus}, {id: scout}, {id: rover}]
seats: [{memberId: scout, operatorId: ava}, {memberId: rover, operatorId: ava}]
"""


@dataclass
class Console:
    base: str
    container: Container  # the stores, on the ingress's Redis
    links: AnswerLinks
    redis: redis.Redis


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, for one module's tests. Not for the session: Playwright's sync API keeps an
    asyncio loop running in the test thread while it is started, and a later test of another
    module in the same worker that calls `asyncio.run` would fail on it; a module's fixtures
    end before the worker runs another module's tests."""
    if not CHROMIUM.exists():
        message = (
            f"the console's browser tests need chromium at {CHROMIUM} (apt-get install chromium)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: CI must run them", pytrace=False)
        pytest.skip(f"SKIPPED: {message}")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def console(redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> Iterator[Console]:
    org = tmp_path / "org.yaml"
    org.write_text(ORG)
    env = {
        **os.environ,
        "SEATWIRE_REDIS_URL": redis_url,
        "SEATWIRE_API_TOKEN": TOKEN,
        "SEATWIRE_ORG_FILE": str(org),
        "SEATWIRE_OUTBOX_PATH": str(tmp_path / "outbox.jsonl"),
        "SEATWIRE_ANSWER_LINK_SECRET": SECRET,
    }
    env.pop("SEATWIRE_BROKER_URL", None)
    port = free_port()
    seatwire = str(Path(sys.executable).parent / "seatwire")
    log = tmp_path / "ingress.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [seatwire, "ingress", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ingress(base, [proc])
        settings = Settings(
            redis_url=redis_url,
            api_token=TOKEN,
            org_file=org,
            outbox_path=tmp_path / "o.jsonl",
            answer_link_secret=SECRET,
        )
        links = AnswerLinks.of(settings)
        assert links is not None
        container = bootstrap.build_container(settings, client=redis_client)
        yield Console(base, container, links, redis_client)
    finally:
        stop_processes([proc])


def now_ms() -> int:
    return int(time.time() * 1000)
