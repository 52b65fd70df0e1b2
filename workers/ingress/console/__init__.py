"""The web console at `/console/` (docs/console.md): pages over the ingress's own stores and
functions, for the operator (a login with the operator token) and for the people an answer
link names (My asks)."""

from __future__ import annotations

from starlette.staticfiles import StaticFiles

from workers.ingress.console.pages import router
from workers.ingress.console.web import (
    STATIC_DIR,
    ConsoleError,
    ConsoleHeaders,
    console_error,
    paged,
)

__all__ = [
    "ConsoleError",
    "ConsoleHeaders",
    "console_error",
    "paged",
    "router",
    "static_files",
]


def static_files() -> StaticFiles:
    """The console's stylesheet, served from the package (nothing from a CDN)."""
    return StaticFiles(directory=STATIC_DIR)
