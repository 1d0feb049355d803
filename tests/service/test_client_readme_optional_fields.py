"""The Python client README names exactly the fields of a view that read 0 when absent.

proto3 Python reads an absent ``optional`` field as its default, 0: ``view.turn``
once the match is over is 0, seat 0's turn to a bot that does not test
``HasField("turn")`` (clients/python/README.md, "A complete game"). The paragraph that
says so lists every such field reachable from a ``View`` (its config's, its last
move's) as a dotted path, and nothing else, checked here against the descriptors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "clients" / "python" / "README.md"
OPENING = "A field the proto marks `optional`"
# `view.turn`, `view.config.match_deals`: a dotted path in code spans, alone.
PATH = re.compile(r"`(view(?:\.[a-z_]+)+)`")


def optional_scalars(message: Descriptor, prefix: str, seen: frozenset[str]) -> Iterator[str]:
    """Dotted paths of the scalar fields with presence (proto3 ``optional``) in
    ``message`` and the messages it holds, each type once along a path."""
    for field in message.fields:
        path = f"{prefix}.{field.name}"
        if field.message_type is None:
            if field.has_presence:
                yield path
        elif field.message_type.full_name not in seen:
            nested = seen | {field.message_type.full_name}
            yield from optional_scalars(field.message_type, path, nested)


def readme_paragraph() -> str:
    """The README's paragraph about absent optional fields."""
    paragraphs = README.read_text(encoding="utf-8").split("\n\n")
    matches = [p for p in paragraphs if p.startswith(OPENING)]
    assert len(matches) == 1, f"README paragraph opening {OPENING!r}"
    return matches[0]


def test_the_readme_names_every_optional_field_of_a_view_and_no_other():
    paragraph = readme_paragraph()
    named = set(PATH.findall(paragraph))
    view = pb.View.DESCRIPTOR
    expected = set(optional_scalars(view, "view", frozenset({view.full_name})))
    # What proto/cardrules/krypkasino/v1/krypkasino.proto declares today; the set above
    # follows the proto, this guards the walk itself.
    assert {"view.turn", "view.seat", "view.config.target_score"} <= expected
    assert named == expected, (sorted(named - expected), sorted(expected - named))
    assert 'view.HasField("turn")' in paragraph


def test_the_paths_the_check_reads_are_what_python_reads():
    """Each path named reads 0 on a default View, and has no presence until set."""
    for path in PATH.findall(readme_paragraph()):
        *parents, name = path.split(".")[1:]
        holder: Message = pb.View()
        for parent in parents:
            holder = getattr(holder, parent)
        assert getattr(holder, name) == 0, path
        assert not holder.HasField(name), path
