"""The comments of the proto files by the full name of what they precede, as the OpenAPI
document's descriptions (``service.openapi``); proto/ is where the API of design section
3 is written and explained.

Only a descriptor set made with ``--include_source_info`` carries them (its
``SourceCodeInfo``), and the generated Python code has none, so they are read when
``scripts/generate_openapi.py`` writes the committed document, never by the server.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2

# Field numbers of descriptor.proto, as used in SourceCodeInfo location paths.
_FILE_MESSAGE, _FILE_ENUM, _FILE_SERVICE = 4, 5, 6
_MESSAGE_FIELD, _MESSAGE_NESTED, _MESSAGE_ENUM = 2, 3, 4
_ENUM_VALUE, _SERVICE_METHOD = 2, 2


def comments(files: descriptor_pb2.FileDescriptorSet) -> dict[str, str]:
    """Leading comments by full name (``pkg.Message.field``, ``pkg.Enum.VALUE``, ...)."""
    found: dict[str, str] = {}
    for file in files.file:
        _Comments(file, found).collect()
    return found


class _Comments:
    """Walks one file's declarations beside its SourceCodeInfo location paths."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto, found: dict[str, str]) -> None:
        self.file = file
        self.found = found
        self.located = {
            tuple(location.path): location.leading_comments or location.trailing_comments
            for location in file.source_code_info.location
        }

    def collect(self) -> None:
        prefix = f"{self.file.package}." if self.file.package else ""
        for i, message in enumerate(self.file.message_type):
            self.message(prefix + message.name, message, (_FILE_MESSAGE, i))
        for i, enum in enumerate(self.file.enum_type):
            self.enum(prefix + enum.name, enum, (_FILE_ENUM, i))
        for i, service in enumerate(self.file.service):
            self.note(prefix + service.name, (_FILE_SERVICE, i))
            for j, method in enumerate(service.method):
                path = (_FILE_SERVICE, i, _SERVICE_METHOD, j)
                self.note(f"{prefix}{service.name}.{method.name}", path)

    def note(self, name: str, path: tuple[int, ...]) -> None:
        if text := _clean(self.located.get(path, "")):
            self.found[name] = text

    def enum(
        self, name: str, enum: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...]
    ) -> None:
        self.note(name, path)
        for i, value in enumerate(enum.value):
            self.note(f"{name}.{value.name}", (*path, _ENUM_VALUE, i))

    def message(
        self, name: str, message: descriptor_pb2.DescriptorProto, path: tuple[int, ...]
    ) -> None:
        self.note(name, path)
        for i, field in enumerate(message.field):
            self.note(f"{name}.{field.name}", (*path, _MESSAGE_FIELD, i))
        for i, nested in enumerate(message.nested_type):
            self.message(f"{name}.{nested.name}", nested, (*path, _MESSAGE_NESTED, i))
        for i, nested_enum in enumerate(message.enum_type):
            self.enum(f"{name}.{nested_enum.name}", nested_enum, (*path, _MESSAGE_ENUM, i))


def _clean(comment: str) -> str:
    """Proto comment lines joined into paragraphs."""
    paragraphs = [
        " ".join(line.strip() for line in block.splitlines() if line.strip())
        for block in comment.strip().split("\n\n")
    ]
    return "\n\n".join(p for p in paragraphs if p)
