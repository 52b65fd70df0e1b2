# One image for every Seatwire process (ingress, each worker pool); compose picks the command.
FROM python:3.11-slim
ENV UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 PYTHONUNBUFFERED=1
RUN pip install --no-cache-dir uv
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY contracts ./contracts
COPY pipeline ./pipeline
COPY workers ./workers
COPY examples ./examples
RUN uv sync --frozen --no-dev
ENV PATH="/app/.venv/bin:$PATH"
RUN mkdir -p /data && chown nobody /data
USER nobody
CMD ["seatwire", "ingress", "--host", "0.0.0.0", "--port", "8080"]
