"""The logging of `seatwire ingress`: uvicorn's, line for line, for less work per request.

The access log writes one record a request, and formatting it was a tenth of a Slack event's
CPU (bench.ingress): uvicorn's access formatter copies the record twice (its own copy, then
its base class's) and looks the status phrase up in `http.HTTPStatus` every time, and each
record gathers its thread, process and caller, which no handler here prints. So:

- `AccessFormatter` writes the line uvicorn's writes (tests/workers/test_ingress_logs.py
  compares them) from one dict of the record's fields, without copying the record; with
  colours (a terminal) it is uvicorn's own;
- `lean_log_records` turns off the record fields nobody prints (logging's documented
  "Optimization" switches): uvicorn's formats read the level, the message and the request,
  and Seatwire's own loggers go to the last-resort handler, which prints the message alone.
"""

from __future__ import annotations

import copy
import http
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

_PHRASES = {status.value: status.phrase for status in http.HTTPStatus}


class AccessFormatter(UvicornAccessFormatter):
    """uvicorn's access formatter without its copies of the record (colourless output)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if self.use_colors:
            return super().formatMessage(record)
        client_addr, method, full_path, http_version, status_code = record.args  # type: ignore[misc]
        code = int(status_code)  # type: ignore[arg-type]
        levelname = record.levelname
        values = dict(record.__dict__)
        values["client_addr"] = client_addr
        values["request_line"] = f"{method} {full_path} HTTP/{http_version}"
        values["status_code"] = f"{code} {_PHRASES.get(code, '')}"
        values["levelprefix"] = levelname + ":" + " " * (8 - len(levelname))
        return self._style._fmt % values


def log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration, its access lines by `AccessFormatter`."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = f"{__name__}.AccessFormatter"
    return config


def lean_log_records() -> None:
    """Log records without the fields no handler of the ingress prints: the thread, the
    process and its multiprocessing name, and the calling function's file and line."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
