"""Project directions over HTTP for people (issue 13): reading them and human votes. The
seats' side is the decision tools (workers/tools/decisions.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from workers.ingress.v1 import require_token

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])
