# syntax=docker/dockerfile:1
# One image for every Seatwire process (ingress, each worker pool, beat, Flower); compose
# picks the command.

# uv pinned to the version the project is developed with (`uv --version`): tests/test_deploy.py
# holds the two to each other.
FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

FROM python:3.11-slim
COPY --from=uv /uv /uvx /usr/local/bin/
# The uv cache lives in a build cache mount (below), never in a layer; the image's own Python
# is used, never a downloaded one.
ENV UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1 \
    UV_PYTHON_DOWNLOADS=never \
    PYTHONUNBUFFERED=1
WORKDIR /app
# The dependencies first, in their own layer: a code change does not reinstall them. No
# dependency group: not dev's tools, nor the demo's in-process Redis stand-in (fakeredis).
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-default-groups --no-install-project
COPY contracts ./contracts
COPY pipeline ./pipeline
COPY workers ./workers
COPY examples ./examples
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-default-groups
# The project is installed editable (its code stays in /app, beside examples/): compile it
# here, since its user may not write __pycache__ and every start (and every health check,
# a new process each time) would compile it again.
RUN python -m compileall -q contracts pipeline workers
ENV PATH="/app/.venv/bin:$PATH"
# A user of its own, owning only the outbox's directory: the code and the venv stay root's.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin seatwire \
    && mkdir -p /data \
    && chown seatwire /data
USER seatwire
CMD ["seatwire", "ingress", "--host", "0.0.0.0", "--port", "8080"]
