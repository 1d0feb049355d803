"""The deadline of an HTTP call: its ``Grpc-Timeout`` header (docs/api.md, "Deadlines").

gRPC carries a call's deadline as ``grpc-timeout``: 1 to 8 digits and a unit, ``H``
(hours), ``M`` (minutes), ``S`` (seconds), ``m`` (milliseconds), ``u``
(microseconds) or ``n`` (nanoseconds), as in ``500m``. The HTTP gateway takes the
same header, as grpc-gateway does, so that an HTTP call queued in an overloaded
server past its caller's patience is refused unserved (``DEADLINE_EXCEEDED``, 504)
like a gRPC call (docs/operations.md, "Overload").
"""

from __future__ import annotations

import re

from service.errors import invalid_argument
from service.http_json import echoed

GRPC_TIMEOUT_HEADER = "Grpc-Timeout"
TIMEOUT_INVALID = "TIMEOUT_INVALID"
GRPC_TIMEOUT = re.compile(r"([0-9]{1,8})([HMSmun])")
_SECONDS_PER_UNIT = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_ECHOED_CHARS = 32


def timeout_seconds(value: str) -> float:
    """The seconds a ``Grpc-Timeout`` value gives the call.

    >>> timeout_seconds("500m"), timeout_seconds("2S"), timeout_seconds("1H")
    (0.5, 2.0, 3600.0)

    Anything else (``1.5S``, ``2s``, nine digits) is refused: ``TIMEOUT_INVALID``.
    """
    match = GRPC_TIMEOUT.fullmatch(value)
    if match is None:
        raise invalid_argument(
            TIMEOUT_INVALID,
            f"the {GRPC_TIMEOUT_HEADER} header must be 1 to 8 digits and a unit, H, M, S, "
            "m (milliseconds), u or n, as in gRPC: 500m",
            None,
            grpc_timeout=echoed(value, _ECHOED_CHARS),
        )
    digits, unit = match.groups()
    return int(digits) * _SECONDS_PER_UNIT[unit]
