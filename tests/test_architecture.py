"""The one dependency rule (docs/architecture.md, "The dependency rule"), checked on the source with
`ast`.

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

# The one exception, pinned by issue 12: `resume_target_state(a, deps=None)` lists the real
# directory when no `readdirSync` is injected (its default). Only `os.listdir` may be
# used there; every caller in workers/ passes its lister explicitly.
ALLOWED_IMPORTS: dict[tuple[str, str], frozenset[str]] = {
    ("pipeline/launches.py", "os"): frozenset({"listdir"}),
}


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

    allowed = {m: attrs for (f, m), attrs in ALLOWED_IMPORTS.items() if f == filename}

    def check_module(node: ast.AST, dotted: str) -> None:
        top = dotted.split(".")[0]
        if top in allowed and dotted == top and isinstance(node, ast.Import):
            return
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
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in allowed
            and node.attr not in allowed[node.value.id]
        ):
            only = sorted(allowed[node.value.id])
            report(node, f"uses {node.value.id}.{node.attr} (only {only} is allowed here)")
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
    assert {
        "pipeline/engagement/__init__.py",
        "pipeline/guardrails.py",
        "contracts/engagement.py",
    } <= walked


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


# --------------------------------------------------------------------------- workers/ rooms

# The rooms of workers/, lowest first. A module may import a module of a lower room, or one
# of its own room; never one above it, nor a room beside it (rooms that share a rank know
# nothing of each other). The most specific prefix names a module's room.
ROOMS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    (
        "foundation",
        0,
        (
            "workers.queues",
            "workers.errors",
            "workers.clock",
            "workers.timezones",
            "workers.memory_broker",
        ),
    ),
    ("config", 1, ("workers.settings", "workers.org")),
    # This process's Prometheus figures (issue 15): prometheus_client only, so every room
    # above may record where things happen.
    ("telemetry", 1, ("workers.telemetry",)),
    # Redis and the wire: the stores know Redis only, the adapters their providers only,
    # the broker Celery only. None of the three knows another.
    ("stores", 2, ("workers.stores",)),
    ("outbound", 2, ("workers.outbound",)),
    ("broker", 2, ("workers.broker",)),
    ("recovery", 3, ("workers.recovery",)),
    ("container", 3, ("workers.container",)),
    ("stages", 4, ("workers.stages",)),
    # A seat's coordination tools (issue 13): over the stores and the stages they feed.
    ("tools", 5, ("workers.tools",)),
    # What an operator reads of a running deployment (workers/status.py): over the stores
    # and the recovery's leader lease, read by the ingress's metrics and the CLI.
    ("status", 5, ("workers.status",)),
    ("ingress", 6, ("workers.ingress",)),
    (
        "runtime",
        7,
        (
            "workers.bootstrap",
            "workers.celery_app",
            "workers.app",
            "workers.embedded",
            "workers.healthcheck",
        ),
    ),
    # The rooms on top, which nothing else in workers/ imports. The demo (workers/demo/):
    # the bundled scenario run through an embedded Seatwire, its parts and its views.
    ("demo", 8, ("workers.demo",)),
    # The command line (workers/cli/): `seatwire` and its subcommands, `seatwire demo`
    # included, so it alone may import the demo.
    ("cli", 9, ("workers.cli",)),
)

# The rooms no other room of workers/ may import: each ranks above every room it is not.
TOP_ROOMS = ("demo", "cli")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for layer in (*PURE_PACKAGES, "workers")
        for p in sorted((ROOT / layer).rglob("*.py"))
    }


def imports_of(path: Path, name: str, known: set[str]) -> list[tuple[int, str]]:
    """Every first-party module `path` imports (at module level or inside a function), each
    resolved to the most specific project module it names, with its line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = tuple(name.split(".")) if path.name == "__init__.py" else tuple(name.split(".")[:-1])
    found: list[tuple[int, str]] = []

    def add(node: ast.AST, dotted: str) -> None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        if dotted and dotted != name:
            found.append((getattr(node, "lineno", 0), dotted))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, package)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                add(node, target if target in known else base)
    return found


def room_of(module: str) -> tuple[str, int] | None:
    best: tuple[int, str, int] | None = None
    for room, rank, prefixes in ROOMS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), room, rank)
    return None if best is None else (best[1], best[2])


def room_violations(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """Every import in workers/ that points above its room or beside it, as 'module:line'."""
    found = []
    for module, edges in sorted(graph.items()):
        if not module.startswith("workers."):
            continue  # the pure layers have their own rule; workers/__init__.py is empty
        here = room_of(module)
        if here is None:
            found.append(f"{module}: belongs to no room (add it to ROOMS)")
            continue
        for line, target in edges:
            there = room_of(target)
            if there is None or there[0] == here[0]:
                continue
            if there[1] >= here[1]:
                found.append(
                    f"{module}:{line}: imports {target} ({there[0]}, rank {there[1]}) from "
                    f"{here[0]} (rank {here[1]})"
                )
    return found


def cycles(graph: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """The import cycles of the graph (its strongly connected components of more than one
    module), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for _, w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, list[tuple[int, str]]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, name, known) for name, path in modules.items()}


def test_every_workers_module_is_in_a_room_and_imports_only_below_it() -> None:
    """No module of workers/ imports one above its room or in a room beside it."""
    found = room_violations(import_graph())
    assert not found, "workers/ breaks its rooms:\n" + "\n".join(found)


def test_the_project_has_no_import_cycle() -> None:
    """No import cycle anywhere in contracts/, pipeline/ or workers/."""
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_room_and_cycle_checks_can_fail() -> None:
    """The checks report a store importing a stage, and a two-module cycle."""
    graph = {
        "workers.stores.journal": [(3, "workers.stages.send")],
        "workers.stages.send": [(9, "workers.stores.journal")],
        "workers.stores.ledger": [(4, "workers.outbound.slack")],
    }
    assert room_violations(graph) == [
        "workers.stores.journal:3: imports workers.stages.send (stages, rank 4) from stores "
        "(rank 2)",
        "workers.stores.ledger:4: imports workers.outbound.slack (outbound, rank 2) from stores "
        "(rank 2)",
    ]
    assert cycles(graph) == [["workers.stages.send", "workers.stores.journal"]]


def imports_of_the_top_rooms(graph: dict[str, list[tuple[int, str]]]) -> list[str]:
    """Every import of a module of the command line or the demo from a module of workers/
    outside those two rooms, as 'module:line'."""
    found = []
    for module, edges in sorted(graph.items()):
        here = room_of(module)
        if not module.startswith("workers.") or (here is not None and here[0] in TOP_ROOMS):
            continue
        for line, target in edges:
            there = room_of(target)
            if there is not None and there[0] in TOP_ROOMS:
                found.append(f"{module}:{line}: imports {target} (the {there[0]} room)")
    return found


def test_the_cli_and_the_demo_are_on_top_and_imported_by_no_other_room() -> None:
    """The command line and the demo rank above every other room (so the room check refuses
    any import of them from below), and no module of workers/ outside them imports them."""
    top = {room: rank for room, rank, _ in ROOMS if room in TOP_ROOMS}
    assert set(top) == set(TOP_ROOMS)
    below = max(rank for room, rank, _ in ROOMS if room not in TOP_ROOMS)
    assert min(top.values()) > below, f"a room ranks as high as {top}"
    found = imports_of_the_top_rooms(import_graph())
    assert not found, "the command line or the demo imported from below:\n" + "\n".join(found)


def test_the_top_room_check_can_fail() -> None:
    """An ingress route importing a CLI module, the embedded runtime importing the demo's
    view, and the demo importing the CLI are each reported."""
    graph = {
        "workers.ingress.ops": [(5, "workers.cli.ops")],
        "workers.embedded": [(7, "workers.demo.view")],
        "workers.demo.tools": [(2, "workers.cli.steward")],
        "workers.cli": [(9, "workers.demo")],
    }
    assert imports_of_the_top_rooms(graph) == [
        "workers.embedded:7: imports workers.demo.view (the demo room)",
        "workers.ingress.ops:5: imports workers.cli.ops (the cli room)",
    ]
    assert room_violations(graph) == [
        "workers.demo.tools:2: imports workers.cli.steward (cli, rank 9) from demo (rank 8)",
        "workers.embedded:7: imports workers.demo.view (demo, rank 8) from runtime (rank 7)",
        "workers.ingress.ops:5: imports workers.cli.ops (cli, rank 9) from ingress (rank 6)",
    ]


def test_the_walk_sees_the_rooms() -> None:
    """The graph holds every room's modules, so the room check cannot pass vacuously."""
    rooms = {room_of(m) for m in import_graph() if m.startswith("workers")}
    assert {r for r, _, _ in ROOMS} <= {r[0] for r in rooms if r is not None}


def test_compose_runs_one_worker_pool_per_stage_queue_and_one_beat() -> None:
    """compose.yaml's worker services consume exactly the stage table's worker queues (the
    steward's included), and one service runs beat."""
    import yaml

    from workers.queues import WORKER_QUEUES

    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    consumed: list[str] = []
    beats = 0
    for service in services.values():
        command = service.get("command") or []
        if command[:2] == ["seatwire", "worker"]:
            consumed += command[command.index("--queues") + 1].split(",")
        elif command[:2] == ["seatwire", "beat"]:
            beats += 1
    assert sorted(consumed) == sorted(q.value for q in WORKER_QUEUES)
    assert beats == 1


# --------------------------------------------------------------------------- function length

# No function or method of workers/ is this long or longer, counted from its `def` line to its
# last line (decorators not counted): past it, split it into helpers with names of their own.
MAX_FUNCTION_LINES = 100


def long_functions(source: str, filename: str) -> list[str]:
    """Every function or method of one module of MAX_FUNCTION_LINES lines or more, as
    'file:line: name is N lines' (a method named Class.method, a nested function outer.inner)."""
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length >= MAX_FUNCTION_LINES:
                    found.append(f"{filename}:{child.lineno}: {name} is {length} lines")
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=filename), "")
    return found


def test_no_function_in_workers_reaches_the_length_limit() -> None:
    """Every function and method of workers/ is shorter than MAX_FUNCTION_LINES lines."""
    paths = sorted((ROOT / "workers").rglob("*.py"))
    assert len(paths) > 100, "the walk found too few modules of workers/ to mean anything"
    found: list[str] = []
    for path in paths:
        found += long_functions(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, (
        f"functions of {MAX_FUNCTION_LINES} lines or more (split them into helpers):\n"
        + "\n".join(found)
    )


def test_the_length_check_can_fail() -> None:
    """A function of exactly the limit is reported with its file, line and length, and so are
    a method and a nested function; one line less, or decorators above, are not counted."""
    body = "    x = 1\n"

    def function(name: str, lines: int, indent: str = "") -> str:
        return f"{indent}def {name}() -> None:\n" + (indent + body) * (lines - 1)

    at_limit = function("f", MAX_FUNCTION_LINES)
    assert long_functions(at_limit, "workers/x.py") == [
        f"workers/x.py:1: f is {MAX_FUNCTION_LINES} lines"
    ]
    under = "@a\n@b\n" + function("g", MAX_FUNCTION_LINES - 1)
    assert long_functions(under, "workers/x.py") == []
    method = "class C:\n" + function("m", MAX_FUNCTION_LINES + 2, indent="    ")
    assert long_functions(method, "workers/x.py") == [
        f"workers/x.py:2: C.m is {MAX_FUNCTION_LINES + 2} lines"
    ]
    nested = "def outer() -> None:\n" + function("inner", MAX_FUNCTION_LINES, indent="    ")
    assert long_functions(nested, "workers/x.py") == [
        f"workers/x.py:1: outer is {MAX_FUNCTION_LINES + 1} lines",
        f"workers/x.py:2: outer.inner is {MAX_FUNCTION_LINES} lines",
    ]


# --------------------------------------------------------------------------- dependencies


def third_party_imports(packages: tuple[str, ...]) -> dict[str, str]:
    """Every top-level module the given packages import that is neither the standard library
    nor first-party, each with one place that imports it (file:line)."""
    import sys

    first_party = {"contracts", "pipeline", "workers", "bench", "tests"}
    found: dict[str, str] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top in first_party or top in sys.stdlib_module_names or top in found:
                        continue
                    found[top] = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
    return found


def declared(group: str | None = None) -> set[str]:
    """The distributions pyproject.toml declares: the runtime ones, or a dependency group's."""
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    specs = (
        project["project"]["dependencies"] if group is None else project["dependency-groups"][group]
    )
    return {re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0].lower() for spec in specs}


def distributions_of(modules: dict[str, str]) -> dict[str, set[str]]:
    """The installed distributions that provide each top-level module."""
    from importlib.metadata import packages_distributions

    provided = packages_distributions()
    return {m: {d.lower().replace("_", "-") for d in provided.get(m, [])} for m in modules}


# Runtime dependencies the code never imports because they are run as commands, each with the
# reason it is in the image anyway.
COMMAND_LINE_TOOLS: dict[str, str] = {
    "flower": "`celery -A workers.app flower`: compose's flower service runs it from the "
    "seatwire image, a Celery subcommand (entry point celery.commands)",
}


def test_every_runtime_import_is_declared_and_every_declared_dependency_is_imported() -> None:
    """What contracts/, pipeline/ and workers/ import from outside the project is a declared
    runtime dependency (or the demo group's, imported lazily: the next test), and every
    runtime dependency is imported by them (nothing declared for nothing, nothing working
    only because something else pulled it in), or is a named command-line tool."""
    imported = third_party_imports(("contracts", "pipeline", "workers"))
    runtime = {d.replace("_", "-") for d in declared()} - set(COMMAND_LINE_TOOLS)
    demo = {d.replace("_", "-") for d in declared("demo")}
    undeclared = [
        f"{where}: imports {module} (from {sorted(dists) or 'nothing installed'})"
        for module, where in imported.items()
        if not (dists := distributions_of({module: where})[module]) & (runtime | demo)
    ]
    assert not undeclared, "imported but not declared:\n" + "\n".join(undeclared)
    used = set().union(*distributions_of(imported).values())
    unused = sorted(runtime - used)
    assert not unused, f"declared in pyproject.toml and imported nowhere: {unused}"


def _module_level(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements a module runs when imported: its body, into `if` and `try` blocks,
    never into a function's or a class's."""
    for statement in statements:
        yield statement
        if isinstance(statement, ast.If | ast.Try):
            blocks = [statement.body, statement.orelse]
            if isinstance(statement, ast.Try):
                blocks += [h.body for h in statement.handlers] + [statement.finalbody]
            for block in blocks:
                yield from _module_level(block)


def test_what_only_the_demo_group_provides_is_imported_lazily() -> None:
    """contracts/, pipeline/ and workers/ import a module of the `demo` dependency group
    (which the image leaves out) only inside a function, never as a module loads: every
    module imports where the group is absent, and only embedded mode needs it."""
    demo = {d.replace("_", "-") for d in declared("demo")}
    imported = third_party_imports(("contracts", "pipeline", "workers"))
    modules = {m for m, dists in distributions_of(imported).items() if dists & demo}
    assert modules, "the demo group provides nothing the code imports"
    eager = []
    for package in ("contracts", "pipeline", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in _module_level(tree.body):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                eager += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                    for name in names
                    if name.split(".")[0] in modules
                ]
    assert not eager, "imported as the module loads:\n" + "\n".join(eager)


def test_each_command_line_tool_is_declared_and_ships_a_command() -> None:
    """Every allowlisted tool is a declared runtime dependency that installs a command (a
    console script or a Celery subcommand), so the allowlist cannot hide a library."""
    from importlib.metadata import distribution

    runtime = {d.replace("_", "-") for d in declared()}
    for name in COMMAND_LINE_TOOLS:
        assert name in runtime, f"{name} is allowlisted but not a runtime dependency"
        groups = {ep.group for ep in distribution(name).entry_points}
        assert groups & {"console_scripts", "celery.commands"}, f"{name} installs no command"


def test_the_test_and_bench_imports_are_declared_too() -> None:
    """bench/ and tests/ import only runtime, demo or dev dependencies."""
    imported = third_party_imports(("bench", "tests"))
    known = {d.replace("_", "-") for d in declared() | declared("dev") | declared("demo")}
    undeclared = [
        f"{where}: imports {module}"
        for module, where in imported.items()
        if not distributions_of({module: where})[module] & known
    ]
    assert not undeclared, "imported but not declared:\n" + "\n".join(undeclared)
