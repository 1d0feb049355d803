"""The protos evolve only in compatible ways (docs/api.md, "State tokens"; design section 3: v1).

``fixtures/released_protos/`` holds a Buf image of the protos each time they
changed on main; ``buf breaking`` with buf.yaml's ``FILE`` rules compares the
working protos with every one. Those rules are the strictest: besides the
wire and JSON forms that tokens and HTTP clients depend on (no field
renumbered, retyped or renamed), they keep the generated code's modules,
names and field presence, which the shipped Python client is made of. A
state token the fixtures' token test does not reach (a field their games
never set) is protected only here. ``buf breaking`` ignores options, so the
HTTP routes (``google.api.http``: verb, path, body) are compared here with
every image's instead: a released one is never removed or changed.

Main is what deploys, so a proto change that lands there is released: a
build of it may have sealed tokens or answered clients with it. So the
newest image must hold every field, enum value and method of the working
protos (a test), and a change that adds one adds an image, in the same commit,
once it passes against the earlier ones. A change to comments, options or imports
alone needs none (no test asks for one). Build the proto module alone, as the earlier
images were: an image of the whole workspace also holds the vendored
google/rpc files, which ``buf breaking`` then calls deleted::

    node_modules/.bin/buf build proto --exclude-source-info \\
        -o tests/service/fixtures/released_protos/N-what-changed.binpb

An image that is on main is never replaced: the next change adds N+1. An image
of your own change that is not on main yet (not committed, or committed only on
your branch) is no release: after a further change to the protos, rebuild it in
place with the same command rather than adding another. The failure of
``test_the_newest_released_image_holds_all_of_the_working_protos`` says which of
the two applies when git can tell (an untracked or modified image is not
committed).

The baseline, the first image, was taken after ``Captured.conceded_by``
gained explicit presence (``optional``, commit e2eb3c3): code generated from
the protos before that has an ``int32`` where it is now optional, a change
no image here sees (docs/api.md, "Upgrades"). The wire format did not change.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2
from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / "node_modules" / ".bin" / "buf"
RELEASED = sorted(
    (Path(__file__).parent / "fixtures" / "released_protos").glob("*.binpb"),
    key=lambda path: int(path.name.split("-", 1)[0]),
)
NEWEST = RELEASED[-1]
KRYPKASINO = Path("proto/cardrules/krypkasino/v1/krypkasino.proto")


def run_buf(workspace: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), f"{BUF} is missing: run `npm ci` (make test does)"
    return subprocess.run(
        [str(BUF), *arguments],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def buf_breaking(workspace: Path, against: Path = NEWEST) -> subprocess.CompletedProcess[str]:
    return run_buf(workspace, "breaking", "--against", str(against))


def declared(image: Path) -> set[str]:
    """Every field, enum value and method of the cardrules files in a Buf image (a Buf
    image is a ``FileDescriptorSet`` on the wire), named with its number."""
    names: set[str] = set()

    def enum(prefix: str, proto: descriptor_pb2.EnumDescriptorProto) -> None:
        names.update(f"{prefix}{proto.name}.{v.name} = {v.number}" for v in proto.value)

    def message(prefix: str, proto: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}{proto.name}"
        names.update(f"{name}.{field.name} = {field.number}" for field in proto.field)
        for nested in proto.nested_type:
            message(f"{name}.", nested)
        for nested_enum in proto.enum_type:
            enum(f"{name}.", nested_enum)

    for file in descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes()).file:
        if not file.package.startswith("cardrules."):
            continue
        prefix = f"{file.package}."
        for proto in file.message_type:
            message(prefix, proto)
        for enum_proto in file.enum_type:
            enum(prefix, enum_proto)
        for service in file.service:
            names.update(f"{prefix}{service.name}/{method.name}" for method in service.method)
    return names


@pytest.mark.parametrize("released", RELEASED, ids=lambda path: path.stem)
def test_the_protos_are_compatible_with_the_released_ones(released: Path) -> None:
    result = buf_breaking(ROOT, released)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_newest_released_image_holds_all_of_the_working_protos(tmp_path: Path) -> None:
    """A field added after the newest image was made (``GameState.last_move`` was, by a
    day) is in tokens that builds of main have sealed, yet nothing would stop a later
    change from renumbering it and stranding every game in flight at that upgrade."""
    working = tmp_path / "working.binpb"
    built = run_buf(ROOT, "build", "--exclude-source-info", "-o", str(working))
    assert built.returncode == 0, built.stdout + built.stderr
    unreleased = sorted(declared(working) - declared(NEWEST))
    assert not unreleased, f"not in {NEWEST.name}: {unreleased}; {image_advice(NEWEST)}"


HTTP: Any = annotations_pb2.http  # the stubs do not type it as an extension
# One HTTP binding of a method (google.api.http): verb, path, body, response body.
Binding = tuple[str, str, str, str]


def bindings(rule: http_pb2.HttpRule) -> set[Binding]:
    """A rule's binding and its ``additional_bindings``; ``custom`` verbs by their kind."""
    found: set[Binding] = set()
    for each in (rule, *rule.additional_bindings):
        verb = each.WhichOneof("pattern")
        if verb is None:
            continue
        path = each.custom.path if verb == "custom" else getattr(each, verb)
        if verb == "custom":
            verb = f"custom {each.custom.kind}"
        found.add((verb, path, each.body, each.response_body))
    return found


def http_rules(image: Path) -> dict[str, set[Binding]]:
    """The ``google.api.http`` bindings of every method of the cardrules files in a Buf
    image, by the method's full name."""
    rules: dict[str, set[Binding]] = {}
    for file in descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes()).file:
        if not file.package.startswith("cardrules."):
            continue
        for service in file.service:
            for method in service.method:
                rule: http_pb2.HttpRule = method.options.Extensions[HTTP]
                rules[f"{file.package}.{service.name}/{method.name}"] = bindings(rule)
    return rules


def unrouted(image: Path) -> list[str]:
    """What the route guard would miss in ``image``: each method of the service without
    a ``google.api.http`` binding (docs/api.md, "HTTP/JSON": every RPC has one), or that
    the image has no method of the service at all. Either means the image was read
    wrongly (say, its options lost), and a guard comparing no routes passes whatever
    changed."""
    rules = http_rules(image)
    service = krypkasino_pb2.DESCRIPTOR.services_by_name["KrypkasinoService"]
    rpcs = {f"{service.full_name}/{method.name}" for method in service.methods}
    if not rules.keys() & rpcs:
        return [f"no method of {service.full_name}; read {sorted(rules)}"]
    return [f"{method} has no HTTP rule" for method, found in sorted(rules.items()) if not found]


def build_image(workspace: Path, image: Path) -> Path:
    built = run_buf(workspace, "build", "proto", "--exclude-source-info", "-o", str(image))
    assert built.returncode == 0, built.stdout + built.stderr
    return image


def changed_routes(released: Path, working: Path) -> list[str]:
    """Each HTTP binding of ``released`` that ``working`` no longer has, with what the
    method has now: a route removed, or its path, verb or body changed. Added ones are
    fine."""
    now = http_rules(working)
    return [
        f"{method}: {verb.upper()} {path} body={body!r} response_body={response!r} is gone "
        f"(now {sorted(now.get(method, set()))})"
        for method, then in sorted(http_rules(released).items())
        for verb, path, body, response in sorted(then - now.get(method, set()))
    ]


@pytest.fixture(scope="module")
def working_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_image(ROOT, tmp_path_factory.mktemp("working") / "working.binpb")


@pytest.mark.parametrize("released", RELEASED, ids=lambda path: path.stem)
def test_the_released_http_routes_are_kept(released: Path, working_image: Path) -> None:
    """``buf breaking`` ignores options, so it passed a route whose path, verb or body
    changed, which breaks every HTTP client of the released route (a mutation review:
    only test_http_gateway.py's literal route list caught it). Every released binding of
    ``google.api.http`` stays as it was; a method or binding may be added."""
    assert not unrouted(released), f"{released.name} read wrongly: {unrouted(released)}"
    assert not changed_routes(released, working_image)


def test_an_image_read_without_its_routes_fails_the_guard(tmp_path: Path) -> None:
    """The guard of test_the_released_http_routes_are_kept fails on an image whose options
    are gone (a mutation review: it asked only for a non-empty map, which an image with
    no rule at all gives), and on one without the service."""
    images = descriptor_pb2.FileDescriptorSet.FromString(NEWEST.read_bytes())
    for file in images.file:
        for service in file.service:
            for method in service.method:
                method.ClearField("options")
    stripped = tmp_path / "stripped.binpb"
    stripped.write_bytes(images.SerializeToString())
    assert unrouted(stripped) == [
        f"cardrules.krypkasino.v1.KrypkasinoService/{name} has no HTTP rule"
        for name in sorted(["NewGame", "LegalMoves", "Play", "Score", "GetView"])
    ]
    for file in images.file:
        del file.service[:]
    serviceless = tmp_path / "serviceless.binpb"
    serviceless.write_bytes(images.SerializeToString())
    assert unrouted(serviceless) == [
        "no method of cardrules.krypkasino.v1.KrypkasinoService; read []"
    ]
    assert not unrouted(NEWEST)


@pytest.mark.parametrize(
    ("old", "new", "gone"),
    [
        (
            'post: "/v1/krypkasino:play"',
            'post: "/v1/krypkasino/play"',
            "Play: POST /v1/krypkasino:play body='*'",
        ),
        (
            'post: "/v1/krypkasino:play"',
            'put: "/v1/krypkasino:play"',
            "Play: POST /v1/krypkasino:play body='*'",
        ),
        (
            'post: "/v1/krypkasino:play"\n      body: "*"',
            'post: "/v1/krypkasino:play"\n      body: "move"',
            "Play: POST /v1/krypkasino:play body='*'",
        ),
        (
            'option (google.api.http) = {\n      post: "/v1/krypkasino:score"\n      body: "*"\n    };',
            "",
            "Score: POST /v1/krypkasino:score body='*'",
        ),
    ],
    ids=["path", "verb", "body", "removed"],
)
def test_a_changed_http_route_is_refused(
    workspace: Path, tmp_path: Path, old: str, new: str, gone: str
) -> None:
    edit(workspace, old, new)
    assert buf_breaking(workspace).returncode == 0, "buf breaking ignores HTTP options"
    changed = changed_routes(NEWEST, build_image(workspace, tmp_path / "edited.binpb"))
    assert len(changed) == 1 and gone in changed[0], changed


def test_an_added_http_binding_is_compatible(workspace: Path, tmp_path: Path) -> None:
    edit(
        workspace,
        'post: "/v1/krypkasino:play"\n      body: "*"',
        'post: "/v1/krypkasino:play"\n      body: "*"\n'
        '      additional_bindings { post: "/v2/krypkasino:play" body: "*" }',
    )
    assert not changed_routes(NEWEST, build_image(workspace, tmp_path / "edited.binpb"))


def git_state(path: Path) -> str | None:
    """How git sees ``path``: ``"committed"`` (tracked and unchanged), ``"untracked"``,
    ``"modified"`` (changed or only staged), or None when git cannot tell (no git, no
    repository)."""
    try:
        result = subprocess.run(
            ["git", "status", "--porcelain", "--ignored", "--", path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    if result.returncode != 0:
        return None
    status = result.stdout[:2]
    if not status:
        return "committed"
    return "untracked" if status in ("??", "!!") else "modified"


def image_advice(newest: Path) -> str:
    """What to do when the working protos hold more than ``newest``: add an image after a
    committed one, rebuild in place one that is not committed yet (this module's
    docstring)."""
    rebuild = (
        "rebuild it in place with the same buf command (this module's docstring): an image "
        "not yet on main is no release"
    )
    add = (
        "add the next image (this module's docstring), built with the same buf command; "
        "an image on main is never replaced"
    )
    state = git_state(newest)
    if state in ("untracked", "modified"):
        return f"{newest.name} is {state} in git, not committed: {rebuild}"
    if state == "committed":
        return (
            f"{newest.name} is committed: {add}; if that commit is your own, not yet on main, "
            f"you may instead {rebuild}"
        )
    return f"{add}; if {newest.name} is your own and not yet on main, {rebuild}"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the Buf workspace whose protos a test may edit."""
    for part in ("proto", "third_party"):
        shutil.copytree(ROOT / part, tmp_path / part)
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    return tmp_path


def edit(workspace: Path, old: str, new: str) -> None:
    path = workspace / KRYPKASINO
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {KRYPKASINO}"
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        # A token sealed before the upgrade would lose its set-aside pile.
        ("bytes set_aside = 14;", "bytes set_aside = 44;", 'field "14" with name "set_aside"'),
        ("int32 deal = 8;", "int64 deal = 8;", 'changed type from "int32" to "int64"'),
        # HTTP/JSON clients send and read the name.
        ("int32 deal = 8;", "int32 deal_number = 8;", 'changed name from "deal" to "deal_number"'),
        ("TEAM_MODE_TRIOS = 3;", "", 'enum value "3" on enum "TeamMode"'),
        ("rpc GetView(", "rpc ReadView(", 'RPC "GetView"'),
    ],
)
def test_an_incompatible_change_is_refused(
    workspace: Path, old: str, new: str, complaint: str
) -> None:
    edit(workspace, old, new)
    result = buf_breaking(workspace)
    assert result.returncode != 0
    assert complaint in result.stdout, result.stdout + result.stderr


def test_a_new_field_is_compatible(workspace: Path) -> None:
    edit(workspace, "bytes set_aside = 14;", "bytes set_aside = 14;\n  bytes graveyard = 999;")
    result = buf_breaking(workspace)
    assert result.returncode == 0, result.stdout + result.stderr


def _git(repository: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", *arguments],
        cwd=repository,
        capture_output=True,
        check=True,
        timeout=30,
    )


def test_the_advice_tells_an_uncommitted_image_from_a_committed_one(tmp_path: Path) -> None:
    """A contributor's own new image, not committed, is rebuilt in place after a further
    proto change; only a committed one calls for the next image."""
    _git(tmp_path, "init", "-q")
    image = tmp_path / "5-new-flag.binpb"
    image.write_bytes(b"first build")
    assert git_state(image) == "untracked"
    assert "untracked in git, not committed: rebuild it in place" in image_advice(image)
    _git(tmp_path, "add", image.name)
    assert git_state(image) == "modified"
    _git(tmp_path, "commit", "-q", "-m", "image")
    assert git_state(image) == "committed"
    assert image_advice(image).startswith("5-new-flag.binpb is committed: add the next image")
    image.write_bytes(b"second build")
    assert git_state(image) == "modified"
    assert "rebuild it in place" in image_advice(image)
    assert git_state(tmp_path.parent / "nowhere" / "x.binpb") is None
