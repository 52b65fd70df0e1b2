"""A seat's coordination tools (issue 13, project-tools.json; docs/tools.md), one module per
group, each registering its tools in `base.REGISTRY` when imported; `load()` imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

from workers.tools.base import REGISTRY, Tool, ToolContext, ToolError, call


def load() -> dict[str, Tool]:
    """Every tool module of this package imported (each registers its tools): the registry."""
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    return REGISTRY


__all__ = ["REGISTRY", "Tool", "ToolContext", "ToolError", "call", "load"]
