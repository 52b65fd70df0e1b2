"""The health check of a Celery container (compose.yaml): `python -m workers.healthcheck NODE
[--leader]`. Exit 0 healthy, 1 not, a wrong configuration included (Docker reserves 2), with
the reason on stderr, which Docker keeps with the container's health.

NODE is a Celery node name as a worker's `--hostname` takes it, `%h` standing for this host
(`send@%h`), or a glob (`beat-*@%h`). The check passes when that node answers a ping over the
broker. The worker's consumer answers it on its own broker connection, so a worker that lost
the broker, is shutting down or is stopped (SIGSTOP, a host pause) does not. `--leader` also
asks that some beat holds the leader lease, the question `seatwire beat status` answers:
without a leader no sweep and no tick is scheduled anywhere.

A check is a new process at every interval, so this imports only the settings, the broker's
configuration and the lease reader, never the stages or the bootstrap (whose stores take as
long to import again): about a third of the CPU of `celery -A workers.app inspect ping`, or of
`seatwire beat status`, which builds the whole container.

Not pure: the broker and Redis.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import redis
from celery.utils.nodenames import host_format

from workers.broker import new_app
from workers.errors import ConfigError
from workers.recovery.leader import status
from workers.settings import Settings, load_settings, masked, scrubbed

PING_TIMEOUT_S = 2.0
REDIS_TIMEOUT_S = 2.0


def node_problem(settings: Settings, node: str, *, timeout_s: float) -> str | None:
    """Why the Celery node `node` (a name or a glob, `%h` expanded) is not answering a ping,
    or None when it answers within `timeout_s`."""
    target = host_format(node)
    app = new_app(settings)
    try:
        if any(c in target for c in "*?["):
            replies = app.control.ping(pattern=target, matcher="glob", limit=1, timeout=timeout_s)
        else:
            replies = app.control.ping([target], timeout=timeout_s)
    except Exception as exc:  # an unreachable broker is an unhealthy node, whatever the error
        url = settings.resolved_broker_url
        return f"cannot reach the broker at {masked(url)}: {scrubbed(exc, url)}"
    finally:
        app.close()
    answered = [name for reply in replies or () for name, body in reply.items() if body]
    if not answered:
        return f"no Celery node {target} answered a ping within {timeout_s:g} s"
    return None


def leader_problem(settings: Settings) -> str | None:
    """Why no beat leads (the lease is free, or Redis cannot be read), or None."""
    client = redis.Redis.from_url(
        str(settings.redis_url),
        socket_timeout=REDIS_TIMEOUT_S,
        socket_connect_timeout=REDIS_TIMEOUT_S,
    )
    try:
        found = status(client)
    except redis.RedisError as exc:
        url = settings.redis_url
        return f"cannot read the beat lease at {masked(url)}: {scrubbed(exc, url)}"
    finally:
        client.close()
    if found.holder is None:
        return "no beat holds the leader lease: nothing schedules the sweeps and ticks"
    return None


def health_problem(node: str, *, leader: bool, timeout_s: float) -> str | None:
    """Why this container is not healthy, from the environment's settings, or None."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        return f"the configuration is refused: {exc}"
    if settings.redis_url is None:
        return "needs SEATWIRE_REDIS_URL: a worker without a shared broker has nobody to ask"
    problem = node_problem(settings, node, timeout_s=timeout_s)
    if problem is None and leader:
        problem = leader_problem(settings)
    return problem


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.healthcheck",
        description="Exit 0 when the Celery node answers a ping (and, with --leader, a beat "
        "leads); 1 with the reason otherwise.",
    )
    parser.add_argument("node", help="a node name or glob, %%h for this host: send@%%h")
    parser.add_argument("--leader", action="store_true", help="also require a beat leader")
    parser.add_argument("--timeout", type=float, default=PING_TIMEOUT_S, help="ping timeout, s")
    args = parser.parse_args(argv)
    problem = health_problem(args.node, leader=args.leader, timeout_s=args.timeout)
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print(f"healthy: {host_format(args.node)}" + (" (a beat leads)" if args.leader else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
