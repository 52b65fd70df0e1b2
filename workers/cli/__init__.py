"""The `seatwire` command: up, demo, worker, ingress, beat (and beat status), dlq, steward,
objectives, seat and seats, token, asks, ask and consents, mcp, schema."""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
import uvicorn
from rich.console import Console

from workers.errors import ConfigError
from workers.queues import WORKER_QUEUES, Queue, Task
from workers.settings import Settings, load_settings, masked, scrubbed

if TYPE_CHECKING:
    import redis
    from prometheus_client import CollectorRegistry

    from workers.stores.dlq import DeadLetters
    from workers.telemetry.serve import MetricsServer

# `-h` as well as `--help`, on every command (a subcommand's context inherits it).
HELP = {"help_option_names": ["-h", "--help"]}

cli = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    context_settings=HELP,
    help="Seatwire: AI agent seats that engage the right person, exactly once.",
)
console = Console()
# Refusals go to stderr: stdout is for what a command was asked for (`demo --json`, ...).
errors = Console(stderr=True)


class Pool(StrEnum):
    """Celery's execution pools a `seatwire worker` may run."""

    prefork = "prefork"
    threads = "threads"
    solo = "solo"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        typer.echo(f"seatwire {version('seatwire')}")
        raise typer.Exit()


@cli.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="print the version"),
    ] = False,
) -> None:
    """Seatwire: AI agent seats that engage the right person, exactly once."""


def _refuse(message: object) -> NoReturn:
    """Stop at start with a clear reason: bad configuration never waits for the first report."""
    errors.print(f"[red]configuration error:[/red] {message}", soft_wrap=True)
    raise typer.Exit(2)


def _settings() -> Settings:
    try:
        settings = load_settings()
    except ConfigError as exc:
        _refuse(exc)
    return settings


@cli.command()
def up(
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(help="port")] = None,
) -> None:
    """Run everything in one process: ingress and workers (embedded unless Redis is set)."""
    from workers.embedded import EmbeddedSystem

    settings = _settings()
    if not settings.embedded:
        _check_reachable(settings)
    system = EmbeddedSystem(settings)
    try:
        api = system.start()
        assert system.container is not None
        sends_to = system.container.outbound.check()  # a bad token is refused now
    except ConfigError as exc:
        system.stop()
        _refuse(exc)
    where = "embedded" if settings.embedded else f"Redis {masked(settings.redis_url)}"
    h, p = host or settings.host, port or settings.port
    console.print(
        f"Seatwire up ({where}) on http://{h}:{p}; send mode {settings.send_mode}, "
        f"asks go to {sends_to}"
    )
    console.print(f"console: http://{h}:{p}/console/ (log in with the operator token)")
    if settings.embedded:
        from workers.cli.tokens import dev_tokens

        console.print(f"operator token: {settings.token()}")
        for seat_id, value in dev_tokens(settings).items():
            console.print(f"seat token ({seat_id}, embedded development only): {value}")
    try:
        uvicorn.run(api, host=h, port=p, log_level="info", timeout_keep_alive=settings.keep_alive_s)
    finally:
        system.stop()


@cli.command()
def demo(
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document: every case, the summary")
    ] = False,
) -> None:
    """Push the bundled scenario through Seatwire over HTTP and show every decision."""
    from workers.demo import run_demo

    try:
        code = run_demo(_settings(), console, as_json=as_json)
    except ConfigError as exc:
        _refuse(exc)
    raise typer.Exit(code)


def _queue_names(queues: str) -> list[str]:
    """The queues a worker was asked for, each a worker queue of the table; exit 2 otherwise
    (beat's queue is `seatwire beat`'s own)."""
    names = [q.strip() for q in queues.split(",") if q.strip()]
    known = {q.value for q in WORKER_QUEUES}
    unknown = [q for q in names if q not in known]
    if unknown or not names:
        console.print(f"[red]unknown queue(s) {unknown}[/red]; choose from {sorted(known)}")
        raise typer.Exit(2)
    return names


def _unreachable(what: str, url: str | None, exc: Exception) -> NoReturn:
    errors.print(
        f"[red]cannot reach {what} at {masked(url)}:[/red] {scrubbed(exc, url)}", soft_wrap=True
    )
    raise typer.Exit(2) from exc


def _check_reachable(settings: Settings) -> None:
    """Refuse to start against a Redis (or a separate broker) that does not answer: a
    process that starts anyway only fails at its first event, in a log nobody reads yet."""
    from kombu.connection import Connection

    from workers import bootstrap

    if settings.redis_url is not None:
        try:
            bootstrap.redis_client(settings.redis_url).ping()
        except Exception as exc:
            _unreachable("Redis", settings.redis_url, exc)
    if settings.broker_url is not None and settings.broker_url != settings.redis_url:
        try:
            # kombu ships py.typed, but Connection.__init__ carries no annotations.
            broker = Connection(settings.broker_url, connect_timeout=2)  # type: ignore[no-untyped-call]
            with broker as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
        except Exception as exc:
            _unreachable("the broker", settings.broker_url, exc)


def _check_worker(settings: Settings, *, sends: bool) -> None:
    """Refuse to start a worker that could only fail at its first task: no Redis, or (for a
    send worker) a missing or wrong token or an API nobody answers at."""
    from workers import bootstrap

    _check_reachable(settings)
    try:
        container = bootstrap.build_container(settings)
    except ConfigError as exc:
        _refuse(exc)
    if sends:
        try:
            where = container.outbound.check()
        except ConfigError as exc:
            _refuse(exc)
        console.print(f"send mode {settings.send_mode}: asks go to {where}")


@cli.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def worker(
    ctx: typer.Context,
    queues: Annotated[str, typer.Option(help="comma-separated queues")] = ",".join(WORKER_QUEUES),
    concurrency: Annotated[int, typer.Option(help="processes (or threads)")] = 2,
    pool: Annotated[Pool, typer.Option(help="Celery's pool", case_sensitive=False)] = Pool.prefork,
    loglevel: Annotated[LogLevel, typer.Option(case_sensitive=False)] = LogLevel.INFO,
    hostname: Annotated[str | None, typer.Option(help="node name")] = None,
) -> None:
    """Run a Celery worker for the given queues, the steward's included (needs
    SEATWIRE_REDIS_URL). Options after `--` go to Celery's worker as they are, e.g.
    `seatwire worker --queues send -- --max-memory-per-child 200000`."""
    from workers.celery_app import create_app

    settings = _settings()
    if settings.embedded:
        _refuse(
            "a separate worker needs a shared broker: set SEATWIRE_REDIS_URL "
            "(or run `seatwire up` for everything in one process)"
        )
    names = _queue_names(queues)
    _check_worker(settings, sends=Queue.SEND.value in names)
    app = create_app(settings)
    # Pool processes are forked from this one and recycled every 1,000 tasks. A full collection
    # in a child would walk (and so copy, page by page) everything it inherited: take all of
    # that out of the collector's sight before the first fork.
    gc.collect()
    gc.freeze()
    argv = [
        "worker",
        "-Q",
        ",".join(names),
        "-c",
        str(concurrency),
        "-P",
        pool.value,
        "--loglevel",
        loglevel.value,
        "-n",
        hostname or f"{'+'.join(names)}-{os.getpid()}@%h",
        "--without-mingle",
        "--without-gossip",
        *ctx.args,
    ]
    app.worker_main(argv)


@cli.command()
def ingress(
    host: Annotated[str | None, typer.Option()] = None,
    port: Annotated[int | None, typer.Option()] = None,
) -> None:
    """Run the HTTP ingress alone (needs SEATWIRE_REDIS_URL and SEATWIRE_API_TOKEN)."""
    from workers import bootstrap
    from workers.celery_app import create_app
    from workers.ingress.app import create_ingress
    from workers.ingress.logs import lean_log_records, log_config

    settings = _settings()
    if settings.embedded:
        _refuse(
            "a separate ingress needs a shared broker: set SEATWIRE_REDIS_URL "
            "(or run `seatwire up`)"
        )
    try:
        app = create_app(settings, register=False)
        container = bootstrap.build_container(settings, app=app)
    except ConfigError as exc:
        _refuse(exc)
    for provider, secret in (
        ("Slack", settings.slack_secret()),
        ("GitHub", settings.github_secret()),
    ):
        if secret is None:
            console.print(
                f"[yellow]{provider} webhooks are off[/yellow]: its secret is not set, so "
                f"/webhooks/{provider.lower()} answers 404"
            )
    api = create_ingress(container, app)
    metrics = _serve_ingress_metrics(settings, api.state.deps.metrics.registry)
    # Everything built so far lives as long as the process: keep the collector from walking
    # it on every full collection (which showed up as tens-of-ms pauses in the ack latency).
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)  # a request allocates hundreds of short-lived objects
    lean_log_records()
    try:
        uvicorn.run(
            api,
            host=host or settings.host,
            port=port or settings.port,
            log_level="info",
            log_config=log_config(),  # uvicorn's, its access lines written for less (logs.py)
            timeout_keep_alive=settings.keep_alive_s,
        )
    finally:
        if metrics is not None:
            metrics.stop()


def _serve_ingress_metrics(settings: Settings, registry: CollectorRegistry) -> MetricsServer | None:
    """With SEATWIRE_METRICS_PORT set, the ingress's metrics (its requests and the cluster's
    figures) served there without a token, for a scraper on the internal network, as every
    worker serves its own; a port that cannot be bound refuses the start (exit 2)."""
    from workers.telemetry.serve import serve_registry

    if settings.metrics_port is None:
        return None
    try:
        server = serve_registry(registry, settings.metrics_port, settings.metrics_host)
    except OSError as exc:
        errors.print(
            f"[red]cannot serve metrics on {settings.metrics_host}:{settings.metrics_port} "
            f"(SEATWIRE_METRICS_PORT):[/red] {exc}",
            soft_wrap=True,
        )
        raise typer.Exit(2) from exc
    console.print(
        f"metrics for Prometheus on http://{settings.metrics_host}:{server.port}/metrics "
        "(no token: keep this port off the public network)"
    )
    return server


@cli.command()
def schema(
    out: Annotated[Path | None, typer.Option(help="write one file per contract here")] = None,
) -> None:
    """Print (or write) the JSON Schema of every contract."""
    import contracts
    from contracts import messages

    models = {name: getattr(contracts, name) for name in contracts.__all__}
    models.update(
        {
            n: getattr(messages, n)
            for n in (
                "InboundEnvelope",
                "WorkEnvelope",
                "DecisionEnvelope",
                "ReservedEnvelope",
                "OutboundAsk",
                "SendResult",
            )
        }
    )
    schemas = {
        name: model.model_json_schema(by_alias=True)
        for name, model in sorted(models.items())
        if hasattr(model, "model_json_schema")
    }
    if out is None:
        typer.echo(json.dumps(schemas, indent=2))
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, body in schemas.items():
        (out / f"{name}.schema.json").write_text(json.dumps(body, indent=2) + "\n")
    console.print(f"wrote {len(schemas)} schemas to {out}")


beat_cli = typer.Typer(
    invoke_without_command=True,
    help="Run beat (the sweeper, the parking lot and the goal steward's tick), or `status`.",
)
cli.add_typer(beat_cli, name="beat")


def _beat_redis(settings: Settings) -> redis.Redis:
    from workers import bootstrap

    if settings.embedded:
        _refuse(
            "a separate beat needs a shared broker: set SEATWIRE_REDIS_URL "
            "(`seatwire up` runs the same tick in its own process)"
        )
    try:
        client = bootstrap.build_container(settings).redis
        client.ping()
    except ConfigError as exc:
        _refuse(exc)
    except Exception as exc:
        _unreachable("Redis", settings.redis_url, exc)
    return client


@beat_cli.callback()
def beat(ctx: typer.Context, loglevel: Annotated[str, typer.Option()] = "INFO") -> None:
    """Run beat: the sweeper and the parking lot, every SEATWIRE_SWEEP_INTERVAL_S, and the
    goal steward's tick for a `steward` worker, every SEATWIRE_STEWARD_INTERVAL_S (needs
    SEATWIRE_REDIS_URL). Several may run: one leads (a lease in Redis), the others stand by
    and take over within 1.25 x SEATWIRE_BEAT_LEASE_MS when it dies."""
    if ctx.invoked_subcommand is not None:
        return
    from workers.celery_app import create_app
    from workers.recovery.leader import Lease, holder_id, start_scheduler

    settings = _settings()
    client = _beat_redis(settings)
    app = create_app(settings)
    holder = holder_id()
    # The scheduler runs in a thread of this process, never a child (Celery's `worker --beat`
    # forks one that outlives a SIGKILLed parent): it dies with the process. It sends a tick
    # only while it holds the leader lease, each with the lease's fencing token. The ticks
    # go to the `beat` queue, which the one-process worker below consumes (whichever beat
    # runs a tick, the token it carries decides whether it may write).
    from workers.bootstrap import build_container
    from workers.stages.controller_tick import lazy_gate

    # The controller's tick is sent only when a seat is due (its check reads the due index).
    # Its container is built at the first check, so a standby beat starts as fast as before.
    gates = {Task.CONTROLLER.value: lazy_gate(lambda: build_container(settings, client=client))}
    lease = Lease(client, holder=holder, lease_ms=settings.beat_lease_ms)
    service = start_scheduler(app, lease, gates)
    console.print(f"beat {holder}: leader lease {settings.beat_lease_ms} ms")
    try:
        app.worker_main(
            [
                "worker",
                "-Q",
                Queue.BEAT.value,
                "-P",
                "solo",
                "-c",
                "1",
                "--loglevel",
                loglevel,
                "-n",
                f"beat-{os.getpid()}@%h",
                "--without-mingle",
                "--without-gossip",
            ]
        )
    finally:
        service.stop()  # gives the lease up: a standby takes over at its next try


@beat_cli.command("status")
def beat_status(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Name beat's leader: holder, fencing token, since when, and the latest elections."""
    from workers.recovery.leader import status

    found = status(_beat_redis(_settings()))
    if as_json:
        typer.echo(json.dumps(found.to_wire(), indent=2))
        return
    if found.holder is None:
        console.print(
            f"no beat leads now (the lease is free; last token issued: {found.token}): "
            "no sweeps are being scheduled"
        )
    else:
        console.print(
            f"leader: {found.holder} (token {found.token}, renewed at {found.renewed_ms}, "
            f"lease ends in {found.expires_in_ms} ms)"
        )
    for term in found.terms:
        console.print(
            f"  elected: {term.get('holder')} token {term.get('token')} at {term.get('atMs')}"
        )
    if found.holder is None:
        raise typer.Exit(1)


dlq = typer.Typer(no_args_is_help=True, help="The dead-letter queue: list and replay.")
cli.add_typer(dlq, name="dlq")


def _dead_letters() -> tuple[Settings, DeadLetters]:
    from workers import bootstrap
    from workers.stores.dlq import DeadLetters

    settings = _settings()
    if settings.embedded or settings.redis_url is None:
        _refuse("the dead-letter queue lives in Redis: set SEATWIRE_REDIS_URL")
    client = bootstrap.redis_client(settings.redis_url)
    return settings, DeadLetters(client, max_deliveries=settings.max_deliveries)


@dlq.command("list")
def dlq_list(
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    limit: Annotated[int, typer.Option(help="at most this many, newest first")] = 100,
) -> None:
    """List the dead letters, newest first: what gave up, where, why, after how many tries."""
    from rich.table import Table

    from workers.bootstrap import now_ms
    from workers.cli.ops import age

    _, letters = _dead_letters()
    found = letters.list(limit)
    if as_json:
        typer.echo(json.dumps([x.to_wire() for x in found], indent=2))
        return
    if not found:
        console.print("the dead-letter queue is empty")
        return
    table = Table(title=f"dead letters ({letters.count()})")
    for column in ("id", "tracking id", "stage", "reason", "deliveries", "age"):
        table.add_column(column, overflow="fold", no_wrap=column in ("stage", "reason"))
    now = now_ms()
    for x in found:
        table.add_row(x.id, x.tracking_id, x.stage, x.reason, str(x.deliveries), age(now - x.at_ms))
    console.print(table)


@dlq.command("replay")
def dlq_replay(dlq_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Re-publish a dead letter's message (same task id) and reopen its journal entry."""
    from workers.bootstrap import now_ms
    from workers.celery_app import create_app
    from workers.recovery.replay import replay

    settings, letters = _dead_letters()
    app = create_app(settings, register=False)
    done = replay(letters, dlq_id, app, deadline_ms=settings.journal_deadline_ms, now_ms=now_ms())
    if done.verb in ("unknown", "missing", "nomessage"):
        errors.print(f"[red]cannot replay:[/red] {done.detail}")
        raise typer.Exit(2)
    console.print(("replayed: " if done.verb == "ok" else "nothing to do: ") + done.detail)


def _steward_commands() -> None:
    from workers.cli.steward import objectives, steward

    cli.add_typer(steward, name="steward")
    cli.command("objectives")(objectives)


_steward_commands()


def _seat_commands() -> None:
    from workers.cli.seat import seat, seats_command

    cli.add_typer(seat, name="seat")
    cli.command("seats")(seats_command)


_seat_commands()


def _token_commands() -> None:
    from workers.cli.tokens import token

    cli.add_typer(token, name="token")


_token_commands()


def _ops_commands() -> None:
    from workers.cli.ops import register

    register(cli)


_ops_commands()


def _asks_commands() -> None:
    from workers.cli.asks import register

    register(cli)


_asks_commands()


def _mcp_command() -> None:
    from workers.cli.mcp import mcp_command

    cli.command("mcp")(mcp_command)


_mcp_command()


def main() -> None:
    # Celery's worker installs its own handlers; elsewhere make SIGTERM a clean exit.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    cli()
