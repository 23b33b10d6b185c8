"""The room's one HTTP client: the hub's REST API, and the board and the labs behind the hub's proxy, with
one token. `room status`, the bench, `room grades --url` and the board's JupyterSource all call through it;
each says what a refusal means where it is (a lab's 403 is a missing scope, the board's is not the teacher).
"""

from __future__ import annotations

from typing import Any

import requests

from ..errors import HubError


class HubClient:
    """Requests to ``url`` (the room's address, or a hub API's) with ``token``; a path may also be a whole URL
    (a lab behind the proxy). Redirects are not followed: the hub answers a bad token with its login page."""

    def __init__(self, url: str, token: str, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"

    def call(
        self,
        path: str,
        method: str = "GET",
        body: object = None,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """The JSON answer (None when empty); HubError with the status (0: no answer, or not JSON)."""
        url = path if path.startswith(("http://", "https://")) else f"{self.url}/{path.lstrip('/')}"
        try:
            reply = self.session.request(
                method,
                url,
                json=body,
                params=params,
                headers=headers,
                timeout=timeout_s or self.timeout_s,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise HubError(
                problem="did not answer",
                detail=str(exc),
                remedy="check that the room runs (`labkit room status`) and its address",
                url=url,
            ) from None
        if not 200 <= reply.status_code < 300:
            why = (
                "the token lacks a scope, or is not the teacher's"
                if reply.status_code in (302, 401, 403)
                else reply.text[:300].strip() or reply.reason
            )
            raise HubError(
                problem=f"answered {method} with {reply.status_code}",
                detail=why,
                remedy="read the hub's log (room/hub.log)",
                url=url,
                status_code=reply.status_code,
            )
        if not reply.content:
            return None
        try:
            return reply.json()
        except ValueError:
            raise HubError(
                problem="did not answer JSON",
                remedy="check the address (the hub's, or its proxy's)",
                url=url,
                status_code=reply.status_code,
            ) from None

    def close(self) -> None:
        self.session.close()


def default_server(user: dict[str, Any]) -> dict[str, Any]:
    """A user's default (unnamed) server as the hub's REST API lists it: {} when it has none."""
    return (user.get("servers") or {}).get("") or {}


def lab_state(server: dict[str, Any] | None) -> str:
    """A participant's default server as the hub's REST API gives it: running, starting, stopping or stopped."""
    if not server or server.get("stopped"):
        return "stopped"
    if server.get("ready"):
        return "running"
    return {"spawn": "starting", "stop": "stopping"}.get(server.get("pending") or "spawn", "starting")
