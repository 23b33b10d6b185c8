from __future__ import annotations

import socket

from ..errors import PortTakenError


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports the OS reports free now; held open together so the three differ."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def ports_taken(ports: list[int], host: str = "127.0.0.1") -> bool:
    """Whether another process now listens on any of ``ports`` (SO_REUSEADDR, as servers bind, so a
    port that only lingers in TIME_WAIT does not count)."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


def claim_ports(wanted: dict[str, int], host: str = "127.0.0.1") -> dict[str, int]:
    """The ports to launch on, by service: each one asked for (non-zero) if no other process holds it,
    else PortTakenError at once; a free port for each left at 0."""
    check_free(wanted, host)
    fixed = {port for port in wanted.values() if port}
    free = iter(p for p in free_ports(len(wanted) + len(fixed), host) if p not in fixed)
    return {service: port or next(free) for service, port in wanted.items()}


def check_free(wanted: dict[str, int], host: str = "127.0.0.1") -> None:
    """PortTakenError for the first port asked for (non-zero) that another process holds."""
    for service, port in wanted.items():
        if port and ports_taken([port], host):
            raise PortTakenError(port=port, service=service, host=host)
