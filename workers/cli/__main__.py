"""`python -m workers.cli`: what a launcher's MCP config runs (workers/outbound/launchers.py)."""

from workers.cli import main

main()
