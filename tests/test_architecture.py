"""The one dependency rule (DESIGN.md section 3), checked on the source with `ast`.

`contracts/` and `pipeline/` are pure: no I/O, no clock, no randomness, no Celery, Redis or
HTTP. Dependencies point one way: workers -> pipeline -> contracts. Every violation is
reported as file:line so the fix is one click away.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE_PACKAGES = ("contracts", "pipeline")

# Top-level modules a pure layer may not import, with the reason printed on a violation.
FORBIDDEN_MODULES: dict[str, str] = {
    **dict.fromkeys(("celery", "kombu"), "the task queue belongs to workers/"),
    **dict.fromkeys(("redis", "fakeredis", "sqlite3"), "storage belongs to workers/"),
    **dict.fromkeys(
        ("fastapi", "starlette", "uvicorn", "httpx", "requests", "aiohttp", "urllib", "slack_sdk"),
        "HTTP belongs to workers/",
    ),
    **dict.fromkeys(
        (
            "socket",
            "socketserver",
            "subprocess",
            "shutil",
            "pathlib",
            "asyncio",
            "threading",
            "multiprocessing",
        ),
        "I/O and concurrency belong to workers/",
    ),
    "os": "the environment and the file system belong to workers/",
    **dict.fromkeys(("time", "datetime"), "time arrives as an argument (now_ms)"),
    **dict.fromkeys(("random", "secrets", "uuid"), "randomness arrives as an argument"),
    "importlib": "dynamic imports would hide a dependency from this check",
}

# First-party layers each pure package may not depend on.
FORBIDDEN_LAYERS: dict[str, frozenset[str]] = {
    "contracts": frozenset({"pipeline", "workers"}),
    "pipeline": frozenset({"workers"}),
}

FORBIDDEN_CALLS: dict[str, str] = {
    "getenv": "reads the environment",
    "open": "opens a file",
    "input": "reads stdin",
    "__import__": "imports dynamically",
    "exec": "executes code dynamically",
    "eval": "evaluates code dynamically",
}
CLOCK_METHODS = frozenset({"now", "utcnow", "today"})


def _resolve(module: str | None, level: int, package: tuple[str, ...]) -> str:
    """The absolute dotted name of an import, resolving `from . import x` against the package."""
    if level == 0:
        return module or ""
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, *([module] if module else [])])


def violations(source: str, filename: str, package: tuple[str, ...]) -> list[str]:
    """Every rule broken by one module of the pure layer `package[0]`, as 'file:line: what'."""
    layer = package[0]
    tree = ast.parse(source, filename=filename)
    found: list[str] = []

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    def check_module(node: ast.AST, dotted: str) -> None:
        top = dotted.split(".")[0]
        if top in FORBIDDEN_MODULES:
            report(node, f"imports {dotted} ({FORBIDDEN_MODULES[top]})")
        if top in FORBIDDEN_LAYERS[layer]:
            report(node, f"imports {dotted} ({layer}/ must not depend on {top}/)")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check_module(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, package)
            if node.module:
                check_module(node, base)
            else:  # `from . import x` / `from .. import workers`
                for alias in node.names:
                    check_module(node, f"{base}.{alias.name}" if base else alias.name)
        elif isinstance(node, ast.Attribute) and node.attr == "environ":
            report(node, "reads os.environ (configuration arrives as an argument)")
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if name in FORBIDDEN_CALLS:
                report(node, f"calls {name}() ({FORBIDDEN_CALLS[name]})")
            elif isinstance(func, ast.Attribute) and name in CLOCK_METHODS:
                report(node, f"calls .{name}() (reads a clock; time arrives as now_ms)")
    return found


def pure_modules() -> Iterator[tuple[Path, tuple[str, ...]]]:
    """Every .py file of contracts/ and pipeline/, with the package it belongs to."""
    for layer in PURE_PACKAGES:
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = path.relative_to(ROOT)
            package = rel.parent.parts
            yield path, package


def test_pure_layers_exist_and_are_walked() -> None:
    """The walk finds the modules this rule protects, so the check cannot pass vacuously."""
    walked = {str(path.relative_to(ROOT)) for path, _ in pure_modules()}
    assert {"pipeline/engagement.py", "pipeline/guardrails.py", "contracts/engagement.py"} <= walked


def test_contracts_and_pipeline_are_pure_and_point_one_way() -> None:
    """No module of contracts/ or pipeline/ does I/O, reads a clock or imports a later layer."""
    found: list[str] = []
    for path, package in pure_modules():
        found += violations(path.read_text(), str(path.relative_to(ROOT)), package)
    assert not found, "the pure layers break the dependency rule:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("package", "source", "expected"),
    [
        (("pipeline",), "import os\n", "pipeline/x.py:1: imports os"),
        (("pipeline",), "x = 1\nimport redis.client\n", "pipeline/x.py:2: imports redis.client"),
        (("pipeline",), "from celery import shared_task\n", "pipeline/x.py:1: imports celery"),
        (("pipeline",), "from datetime import datetime\n", "pipeline/x.py:1: imports datetime"),
        (("pipeline",), "import time as t\n", "pipeline/x.py:1: imports time"),
        (("pipeline",), "from random import choice\n", "pipeline/x.py:1: imports random"),
        (("pipeline",), "import httpx, json\n", "pipeline/x.py:1: imports httpx"),
        (
            ("pipeline",),
            "from workers.tasks import run\n",
            "pipeline/x.py:1: imports workers.tasks",
        ),
        (("pipeline",), "from .. import workers\n", "pipeline/x.py:1: imports workers"),
        (
            ("contracts",),
            "from pipeline.engagement import x\n",
            "contracts/x.py:1: imports pipeline.engagement",
        ),
        (("contracts",), "import workers\n", "contracts/x.py:1: imports workers"),
        (
            ("pipeline",),
            "def f(env):\n    return env.environ\n",
            "pipeline/x.py:2: reads os.environ",
        ),
        (("pipeline",), "v = getenv('X')\n", "pipeline/x.py:1: calls getenv()"),
        (("pipeline",), "v = stamp.utcnow()\n", "pipeline/x.py:1: calls .utcnow()"),
        (("pipeline",), "v = clock.now()\n", "pipeline/x.py:1: calls .now()"),
        (("pipeline",), "v = date.today()\n", "pipeline/x.py:1: calls .today()"),
        (("pipeline",), "f = open('x')\n", "pipeline/x.py:1: calls open()"),
    ],
)
def test_the_checker_reports_each_violation_with_file_and_line(
    package: tuple[str, ...], source: str, expected: str
) -> None:
    """The checker itself flags each forbidden import or call at its file:line."""
    filename = f"{package[0]}/x.py"
    found = violations(source, filename, package)
    assert len(found) == 1, found
    assert found[0].startswith(expected)


@pytest.mark.parametrize(
    ("package", "source"),
    [
        (("pipeline",), "import re, hashlib, math\nfrom collections.abc import Mapping\n"),
        (("pipeline",), "from contracts.engagement import Target\n"),
        (("pipeline",), "from pipeline.guardrails import check_guardrails\n"),
        (("pipeline",), "from . import guardrails\n"),
        (("contracts",), "from contracts._base import Wire\nfrom pydantic import BaseModel\n"),
        (("pipeline",), "def f(now_ms: int) -> int:\n    return now_ms + 1\n"),
    ],
)
def test_the_checker_allows_pure_code(package: tuple[str, ...], source: str) -> None:
    """Standard pure modules and imports along the allowed direction pass the checker."""
    assert violations(source, f"{package[0]}/x.py", package) == []
