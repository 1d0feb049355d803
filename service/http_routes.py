"""HTTP routes derived from the ``google.api.http`` annotations (design sections 3 and 6).

Nothing here lists the RPCs: every annotated method of a service descriptor
becomes a route, and its handler is the transport-free API method of the same
name in snake_case (``GetView`` -> ``get_view``). Annotating a new RPC and
implementing it on the API class is all it takes to serve it over HTTP.

The gateway supports what the API uses (AIP-136 custom methods): a literal
path and ``body: "*"``. Any other shape fails at start-up rather than being
served wrongly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.api import annotations_pb2, http_pb2
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from service.descriptors import snake_case

HTTP_VERBS = ("get", "put", "post", "delete", "patch")
# Paths the gateway serves beside the RPCs: the OpenAPI document, and for load balancers
# and ingresses that can only check HTTP, the twins of the gRPC health service's
# ``liveness`` and ``readiness`` (503 from the moment a drain begins).
OPENAPI_PATH = "/openapi.json"
LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
# The stubs of googleapis-common-protos do not type extensions as such.
_HTTP_EXTENSION: Any = annotations_pb2.http


class UnsupportedRouteError(ValueError):
    """An annotation the gateway cannot serve (a path template, a partial body, ...)."""


@dataclass(frozen=True, slots=True)
class Route:
    """One HTTP binding of one RPC."""

    http_method: str
    """Upper case, e.g. ``POST``."""
    path: str
    service: str
    """The service's full name, as gRPC and the metrics call it."""
    method: str
    """The RPC name, e.g. ``GetView``."""
    handler_name: str
    """The API method serving it, e.g. ``get_view``."""
    request_class: type[Message]
    response_class: type[Message]


def http_rules(method: MethodDescriptor) -> list[http_pb2.HttpRule]:
    """The method's HTTP rule and its additional bindings; empty when not annotated."""
    options = method.GetOptions()
    if not options.HasExtension(_HTTP_EXTENSION):
        return []
    rule: http_pb2.HttpRule = options.Extensions[_HTTP_EXTENSION]
    return [rule, *rule.additional_bindings]


def _binding(method: MethodDescriptor, rule: http_pb2.HttpRule) -> tuple[str, str]:
    kind = rule.WhichOneof("pattern")
    if kind not in HTTP_VERBS:
        raise UnsupportedRouteError(f"{method.full_name}: HTTP pattern {kind!r} is not supported")
    path: str = getattr(rule, kind)
    where = f"{method.full_name} ({kind.upper()} {path})"
    if not path.startswith("/") or "{" in path or "*" in path:
        raise UnsupportedRouteError(f"{where}: only literal paths are supported")
    if kind == "get" or rule.body != "*":
        raise UnsupportedRouteError(f'{where}: only body "*" is supported')
    if rule.response_body:
        raise UnsupportedRouteError(f"{where}: response_body is not supported")
    return kind.upper(), path


def routes(service: ServiceDescriptor) -> Iterator[Route]:
    """Every HTTP binding of every annotated method of ``service``, in declaration order."""
    for method in service.methods:
        for rule in http_rules(method):
            http_method, path = _binding(method, rule)
            yield Route(
                http_method=http_method,
                path=path,
                service=service.full_name,
                method=method.name,
                handler_name=snake_case(method.name),
                request_class=GetMessageClass(method.input_type),
                response_class=GetMessageClass(method.output_type),
            )
