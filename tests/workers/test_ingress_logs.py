"""`seatwire ingress` writes uvicorn's access lines, character for character, with its cheaper
formatter (workers/ingress/logs.py)."""

from __future__ import annotations

import logging
import logging.config

import pytest
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

from workers.ingress.logs import AccessFormatter, log_config

ACCESS_FMT = LOGGING_CONFIG["formatters"]["access"]["fmt"]


def _record(
    status: int, level: int = logging.INFO, path: str = "/webhooks/slack"
) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        level,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:53412", "POST", path, "1.1", status),
        None,
    )


@pytest.mark.parametrize("status", [200, 202, 204, 401, 404, 409, 413, 429, 503, 299, 599])
@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING, logging.DEBUG])
@pytest.mark.parametrize("colours", [False, True])
def test_an_access_line_is_uvicorn_s(status: int, level: int, colours: bool) -> None:
    ours = AccessFormatter(ACCESS_FMT, use_colors=colours)
    theirs = UvicornAccessFormatter(ACCESS_FMT, use_colors=colours)
    record = _record(status, level, "/v1/events?x=%20y")
    assert ours.format(record) == theirs.format(_record(status, level, "/v1/events?x=%20y"))
    assert "client_addr" not in record.__dict__  # the record itself is left as it was


def test_the_config_is_uvicorn_s_with_the_access_formatter_swapped() -> None:
    config = log_config()
    expected = {
        **LOGGING_CONFIG["formatters"]["access"],
        "()": "workers.ingress.logs.AccessFormatter",
    }
    assert config["formatters"]["access"] == expected
    assert {k: v for k, v in config.items() if k != "formatters"} == {
        k: v for k, v in LOGGING_CONFIG.items() if k != "formatters"
    }
    assert LOGGING_CONFIG["formatters"]["access"]["()"] == "uvicorn.logging.AccessFormatter"


def test_the_configured_access_logger_writes_uvicorn_s_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = log_config()
    config["formatters"]["access"]["use_colors"] = False
    logging.config.dictConfig(config)
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "POST", "/webhooks/slack", "1.1", 200
    )
    assert (
        capsys.readouterr().out
        == 'INFO:     127.0.0.1:1 - "POST /webhooks/slack HTTP/1.1" 200 OK\n'
    )
