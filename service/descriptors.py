"""What both transports read from the API's descriptors: an RPC's method name on the
API class, and a message class's descriptor."""

from __future__ import annotations

import re
from typing import cast

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message


def message_descriptor(message_class: type[Message]) -> Descriptor:
    """The class's descriptor (the stubs also allow upb's own descriptor type)."""
    return cast(Descriptor, message_class.DESCRIPTOR)


def snake_case(name: str) -> str:
    """``LegalMoves`` -> ``legal_moves`` (the API's method name for an RPC)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
