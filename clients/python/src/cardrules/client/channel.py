"""Channel settings: the retry policy, load balancing and health checking as a gRPC
service config.

Every cardrules RPC is a pure function of its request (design section 3), so
retrying one after ``UNAVAILABLE`` can never play a move twice: the retried
request carries the same state token and yields the same answer. The policy
lives in the channel's service config, where gRPC applies it with backoff and
within the call's overall deadline.

With a load-balancing policy the channel also checks each server's health:
a server that is shutting down turns ``readiness`` NOT_SERVING and keeps
serving for a moment (``--drain-delay-seconds``), and the channel stops
sending it calls as soon as it hears so (design section 6).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

#: Fully qualified gRPC service names the retry policy applies to.
SERVICES = ("cardrules.krypkasino.v1.KrypkasinoService",)

#: The retry policy: up to 4 attempts, only after ``UNAVAILABLE``.
RETRY_POLICY: dict[str, Any] = {
    "maxAttempts": 4,
    "initialBackoff": "0.1s",
    "maxBackoff": "1s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}

#: The health service name that client-side health checking watches: the
#: server's readiness, which turns NOT_SERVING when the server begins to drain.
HEALTH_CHECK_SERVICE = "readiness"

#: Default deadline of every call, in seconds (the proto documents 1 s per RPC;
#: the slack covers retries and a cold connection).
DEFAULT_TIMEOUT = 5.0

ChannelOptions = list[tuple[str, Any]]


def service_config(
    load_balancing: str | None = None, services: Sequence[str] = SERVICES
) -> dict[str, Any]:
    """The service config: the retry policy and, if given, a load-balancing policy.

    ``load_balancing="round_robin"`` spreads calls over every address that a
    ``dns:///`` target resolves to, such as the pods behind a headless
    Kubernetes Service; gRPC's default (``pick_first``) sticks to one of them.

    A load-balancing policy comes with client-side health checking
    (``healthCheckConfig``): the channel watches each server's
    ``HEALTH_CHECK_SERVICE`` and sends calls only to servers that report
    SERVING. A draining server reports NOT_SERVING before it stops, so no
    call is sent to it once it has begun to stop. A call with no healthy
    server left fails at once with ``UNAVAILABLE`` (and is retried). Servers
    without a health service count as healthy. gRPC applies health checking
    under ``round_robin`` and similar policies and ignores it under
    ``pick_first``.
    """
    config: dict[str, Any] = {
        "methodConfig": [
            {
                "name": [{"service": service} for service in services],
                "retryPolicy": dict(RETRY_POLICY),
            }
        ]
    }
    if load_balancing is not None:
        config["loadBalancingConfig"] = [{load_balancing: {}}]
        config["healthCheckConfig"] = {"serviceName": HEALTH_CHECK_SERVICE}
    return config


def channel_options(
    load_balancing: str | None = None, extra: Sequence[tuple[str, Any]] = ()
) -> ChannelOptions:
    """Options for ``grpc.insecure_channel`` / ``grpc.secure_channel`` (or their ``aio`` twins).

    Use them to build your own channel with the client's retry policy. When an
    option is given twice, grpc keeps the first, so ``extra`` options go first
    and override the client's.
    """
    given = {name for name, _ in extra}
    defaults = [
        ("grpc.enable_retries", 1),
        ("grpc.service_config", json.dumps(service_config(load_balancing))),
    ]
    return [*extra, *(option for option in defaults if option[0] not in given)]


class UseDefault(enum.Enum):
    """Marks a per-call ``timeout`` that was not given: the client's default applies."""

    TIMEOUT = enum.auto()


#: Pass as ``timeout`` (or omit it) to use the client's default deadline.
DEFAULT = UseDefault.TIMEOUT

#: A per-call deadline in seconds; ``None`` means no deadline, ``DEFAULT`` the client's.
Timeout = float | None | UseDefault

#: Call metadata as ``(key, value)`` pairs; binary values need keys ending in ``-bin``.
Metadata = Sequence[tuple[str, str | bytes]]


def check_channel_arguments(
    target: str | None, channel: object | None, has_channel_settings: bool
) -> None:
    """Exactly one of ``target`` and ``channel``; channel settings only with a target."""
    if (target is None) == (channel is None):
        raise TypeError("give exactly one of target and channel")
    if channel is not None and has_channel_settings:
        raise TypeError(
            "credentials, load_balancing and options configure a channel the client creates; "
            "build a given channel with channel_options() instead"
        )
