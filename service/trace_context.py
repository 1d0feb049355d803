"""The trace a call belongs to, from its W3C Trace Context ``traceparent`` (design section 6).

Platform teams trace with OpenTelemetry: their clients, and its browser fetch
instrumentation (which the CORS policy lets through, ``service.http_cors``), send a
``traceparent`` header (gRPC metadata ``traceparent``). Its trace-id goes into the
request log line as ``trace_id``, to find a call's line from its trace, and its parent-id
as ``parent_id``: "the ID of this request as known by the caller" (section 3.2.2.4), the
client span's id, which tells apart the lines of a trace's many calls (a backend runs a
whole turn loop under one trace). Nothing else of it is used, and nothing is sent back.

The value is read as W3C Trace Context Level 1, section 3.2 ("Traceparent Header",
https://www.w3.org/TR/trace-context-1/#traceparent-header) says:
``version "-" trace-id "-" parent-id "-" trace-flags``, each lowercase hex (HEXDIGLC):
a 2-digit version other than ``ff``; a 32-digit trace-id and a 16-digit parent-id,
neither all zeros; 2 digits of flags. Version ``00`` ends there; a higher version may
carry more after the flags, behind a ``-`` (3.2.4, "Versioning of traceparent"). HTTP's
optional white space (space, tab) around the value is not part of it, as the W3C test
suite has it; any other deviation makes the value invalid, which is not an error: the
call is served and logged as without one (an invalid value is ignored, 3.2.2.3 and
3.2.2.4). Two ``traceparent`` headers are invalid too (the W3C suite's
``test_traceparent_duplicated``): the HTTP gateway passes ``DUPLICATE`` for them
(grpc itself keeps one ``traceparent`` of a call's metadata, the last).

Why no library: OpenTelemetry's ``TraceContextTextMapPropagator`` (opentelemetry-api)
parses the same grammar, but would be a new runtime dependency, and would build its
span context and context objects on every call, for two fields of a log line. This
module is the grammar alone: one compiled pattern, run only when the header came.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: The gRPC metadata key and (case-insensitively) the HTTP header.
TRACEPARENT_HEADER = "traceparent"

#: What a transport passes for a call with two or more ``traceparent`` values: invalid.
DUPLICATE = ""

# Lowercase hex only (HEXDIGLC): no re.IGNORECASE. Groups: version, trace-id,
# parent-id, and a future version's remainder, whatever follows a "-" ("." matches no
# line break, which no header value holds).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?")
# HTTP's optional white space (RFC 9110, 5.6.3), which the W3C test suite allows around it.
_OWS = " \t"
_NO_TRACE = "0" * 32
_NO_PARENT = "0" * 16


class Trace(NamedTuple):
    """A valid ``traceparent``'s ids, as the log line names them (W3C's own names)."""

    #: 32 lowercase hex digits: the whole trace's id.
    trace_id: str
    #: 16 lowercase hex digits: the caller's span, the id of this call as it knows it.
    parent_id: str


def trace_from(traceparent: str | None) -> Trace | None:
    """The trace-id and parent-id of a valid ``traceparent``, else None.

    None for no value, ``DUPLICATE``, or one that is not valid as section 3.2 of W3C
    Trace Context Level 1 defines it (the module's docstring): never an error. Both ids
    come from the one match, so a call's value is parsed once.
    """
    if not traceparent:
        return None
    match = _TRACEPARENT.fullmatch(traceparent.strip(_OWS))
    if match is None:
        return None
    version, trace_id, parent_id, future = match.groups()
    if version == "ff" or (version == "00" and future is not None):
        return None
    if trace_id == _NO_TRACE or parent_id == _NO_PARENT:
        return None
    return Trace(trace_id, parent_id)
