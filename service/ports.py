"""Whether a server can listen where it is told to, checked before anything binds, and
the claim that keeps a second server with workers off its ports; the ``cannot listen``
line that says why not and which setting mends it."""

from __future__ import annotations

import errno
import socket

from service.config import ServerConfig, env_name, host_port
from service.listen import (
    bind_error,
    is_address,
    is_wildcard,
    listen_addresses,
    numeric_host,
    resolved_addresses,
)
from service.logs import get_logger

_log = get_logger("cardrules.server")


def cannot_listen(listener: str, host: str, port: int, error: str) -> None:
    """The ``cannot listen`` line: which port, why, and the setting that mends it (a
    newcomer whose ``make serve`` found 50051 taken was told only the first two): the
    host's when no port would do, else the port's."""
    if host_at_fault(host):
        setting = f"--host or {env_name('host')}"
    else:
        setting = f"--{listener}-port or {env_name(f'{listener}_port')}"
    _log.error(
        "cannot listen",
        listener=listener,
        address=host_port(host, port),
        error=error,
        setting=setting,
    )


def host_at_fault(host: str) -> bool:
    """Whether ``host`` cannot be listened on at any port: a name that does not resolve,
    or an address that is not this machine's (a review found such a host blamed on
    ``--grpc-port``)."""
    if is_wildcard(host):
        return False
    try:
        addresses = resolved_addresses(host, 0)
    except OSError:
        return True
    return any(bind_error(family, address) is not None for family, address in addresses)


def ports_free(config: ServerConfig, claims: list[socket.socket]) -> bool:
    """Whether the configured ports are free (else logged, ``cannot listen``).

    With workers, each port they share is claimed first (``claim``), into ``claims``.
    """
    for port, listener in (
        (config.grpc_port, "grpc"),
        (config.http_port, "http"),
        (config.metrics_port, "metrics"),
    ):
        error = None
        if config.workers > 1 and listener != "metrics":
            error = claim(port, claims)
        # Port 0 is checked too (any free port; for metrics, none): a host that is no
        # address of this machine is told here, not in grpc's words, which omit why.
        if error is None and (port or listener != "metrics"):
            error = taken(config.host, port)
        if error is not None:
            cannot_listen(listener, config.host, port, error)
            return False
    return True


#: The abstract Unix socket (Linux) a server with workers binds for each port they
#: share, for its whole life (``claim``): ``ss -xap | grep cardrules-port`` names it.
CLAIM_NAME = "cardrules-port-{port}"


def claim(port: int, claims: list[socket.socket]) -> str | None:
    """Claim ``port`` for this server's workers, appending the claim to ``claims``;
    why it cannot, or None.

    ``taken`` alone cannot keep a second server with workers off the port: its test
    bind is released again before the workers bind, with SO_REUSEPORT, so two
    servers started at the same moment both found the ports free and then shared
    them, each answering about half the calls with keys of its own. Binding a name
    in the abstract namespace is atomic: of two servers one gets it, and keeps it
    until it begins to stop (``service.supervisor._supervise``) or exits, however it dies (the kernel
    closes it, and an abstract name leaves no file behind). The name is per network namespace, as ports are, and
    holds the port number alone: SO_REUSEPORT also shares a port between a
    wildcard host and an address (``0.0.0.0`` and ``127.0.0.1``), or two spellings
    of one (``localhost``). The socket is close-on-exec (Python's default), and
    each worker closes its copy as it is forked (``service.supervisor._fork_workers``): a worker
    outliving its supervisor must not hold the port's claim while it drains.
    Workers, and so this, are Linux's alone (``serve_command.run_serve`` refuses them
    elsewhere), as is the abstract namespace.
    """
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind("\0" + CLAIM_NAME.format(port=port))
    except OSError as error:
        claim.close()
        if error.errno == errno.EADDRINUSE:
            return (
                f"another cardrules server with workers is starting or serving on port {port}"
                f" (it holds @{CLAIM_NAME.format(port=port)})"
            )
        return f"cannot claim port {port} for the workers: {error}"
    claims.append(claim)
    return None


def taken(host: str, port: int) -> str | None:
    """Why ``port`` on ``host`` is not free, or None: checked before anything binds.

    Workers bind with SO_REUSEPORT, which shares a port with any process of the
    same user that does so too: a second server started by mistake on the same
    ports would take half the connections, with other keys. A bind without it
    fails on a port anyone listens on, but only once the workers listen: a server
    with workers claims its ports first (``claim``). It also saves grpc's own
    refusal, which says only "Failed to bind" and writes a line of its own to stderr.

    A wildcard host is served on both ``0.0.0.0`` and ``[::]`` (``service.listen``):
    both must be free. grpc would quietly fall back to IPv4 alone when another
    process listens on ``[::]``, leaving it the clients that reach the port over
    IPv6. A name is served on each address it resolves to (a loopback name on both
    loopbacks too), on every port (``service.listen``): each must be free, and the
    one that is not is named.
    """
    try:
        addresses = listen_addresses(host, port)
    except OSError as error:
        return str(error)
    for family, address in addresses:
        # Taken, or no socket at all (no IPv6, no descriptors left).
        if (refused := bind_error(family, address)) is None:
            continue
        if address[0] == host or (is_address(host) and not is_wildcard(host)):
            return str(refused)  # the host's own address, however it is spelled
        too = " too" if is_wildcard(host) else ""
        return (
            f"{host_port(numeric_host(address), port)}, which {host} is served on{too}: {refused}"
        )
    return None
