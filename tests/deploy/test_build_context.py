"""What ``.dockerignore`` keeps out of the image's build context, and what the
wheels take of it (docs/operations.md, "The image").

The Dockerfile copies ``engine/``, ``service/`` and ``clients/python/``, and the two
wheels built from them reach the final image's venv. Without ``.gitignore`` in the
context, nothing but ``.dockerignore`` and the wheels' hatchling config tells a
module from a stray ``creds.json``: both are allowlists of the kinds of file git
tracks there (a release review found any file not on the former denylist, such as
``service/creds.json``, in the image).

``context_excludes`` follows Docker's and Buildah's matcher (moby/patternmatcher): a
pattern is anchored at the context root, ``*`` and ``?`` stay within one path
segment, ``**`` spans any number of them, ``!`` re-includes, the last match wins,
and a path is excluded when it or a folder above it is. ``context_keeps`` adds how
Podman walks the context: a left-out folder is entered only when a ``!`` pattern
starts with its path, so ``engine/**`` then ``!engine/**/*.py`` loses
``engine/krypkasino/``. Both were checked against ``podman build`` (Podman 4.3).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.deploy.manifests import ROOT

DOCKERIGNORE = ROOT / ".dockerignore"

#: ``(excludes, text, regex)`` of one pattern, its ``!`` and outer slashes removed.
Pattern = tuple[bool, str, re.Pattern[str]]


def _regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of one cleaned ``.dockerignore`` pattern."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        elif pattern[i] == "[":  # a character class, copied as it is
            end = pattern.index("]", i)
            parts.append(pattern[i : end + 1])
            i = end + 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(parts))


def parse(lines: list[str]) -> list[Pattern]:
    """The patterns of ``.dockerignore`` lines, in order (comments and blanks skipped)."""
    result = []
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        cleaned = text.lstrip("!").strip("/")
        result.append((not text.startswith("!"), cleaned, _regex(cleaned)))
    return result


def patterns() -> list[Pattern]:
    """The patterns of the project's ``.dockerignore``."""
    return parse(DOCKERIGNORE.read_text().splitlines())


def context_excludes(path: str, rules: list[Pattern] | None = None) -> bool:
    """Whether the patterns leave out ``path`` (relative, ``/``-separated) when it is
    looked at: every builder leaves out a path for which this holds."""
    rules = patterns() if rules is None else rules
    segments = path.split("/")
    prefixes = ["/".join(segments[: n + 1]) for n in range(len(segments))]
    excluded = False
    for excludes, _, regex in rules:
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = excludes
    return excluded


def context_keeps(path: str, rules: list[Pattern] | None = None) -> bool:
    """Whether the context holds ``path`` as Podman walks it: no folder above it is
    left out unless a ``!`` pattern starts with that folder's path, and it is not
    left out itself."""
    rules = patterns() if rules is None else rules
    segments = path.split("/")
    for n in range(1, len(segments)):
        folder = "/".join(segments[:n])
        entered = any(not excludes and text.startswith(f"{folder}/") for excludes, text, _ in rules)
        if context_excludes(folder, rules) and not entered:
            return False
    return not context_excludes(path, rules)


def tracked(*folders: str) -> list[str]:
    """The files git tracks under ``folders``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return sorted(name for name in listed.stdout.split("\0") if name)


#: The folders the Dockerfile copies whole.
COPIED = ("engine", "service", "clients/python")

#: Files the Dockerfile copies besides those folders: they must stay in the context.
NEEDED = ["requirements/runtime.lock", "pyproject.toml"]

#: Local files that would end in the image's venv if the context took them: secrets,
#: notes, test and tool caches, a virtual environment, bytecode of the machine that
#: built it.
STRAYS = [
    "service/creds.json",
    "service/id_rsa",
    "service/keys/client.p12",
    "service/dev.pem",
    "service/tls.key",
    "service/.env",
    "engine/notes.txt",
    "engine/krypkasino/TODO",
    "clients/python/src/cardrules/x.json",
    "clients/python/src/cardrules/client/token.json",
    "clients/python/src/cardrules/cards/v1/cards.proto.bak",
    "engine/.hypothesis/examples/x",
    "engine/.pytest_cache/v/cache/nodeids",
    "service/.mypy_cache/3.11/service/config.data.json",
    "service/.ruff_cache/CACHEDIR.TAG",
    "service/.venv/lib/python3.11/site-packages/six.py",
    "clients/python/.venv/bin/python",
    "clients/python/dist/cardrules_client-0.1.0-py3-none-any.whl",
    "clients/python/build/lib/cardrules/__init__.py",
    "service/.coverage",
    "service/__pycache__/config.cpython-311.pyc",
    "clients/python/src/cardrules_client.egg-info/PKG-INFO",
]


def test_the_matcher_follows_docker():
    assert _regex("*.pem").fullmatch("dev.pem")
    assert not _regex("*.pem").fullmatch("service/dev.pem")  # anchored at the root
    assert _regex("**/*.pem").fullmatch("dev.pem")  # ** spans zero folders too
    assert _regex("**/*.pem").fullmatch("service/keys/dev.pem")
    assert not _regex("service/?.py").fullmatch("service/ab.py")


def test_the_walk_follows_podman():
    """What ``podman build`` (Podman 4.3) put in the context: a ``!`` pattern that
    starts with a left-out folder's path is needed to enter it."""
    generic = parse(["engine/**", "!engine/**/*.py"])
    assert not context_excludes("engine/krypkasino/play.py", generic)
    assert context_keeps("engine/cards.py", generic)
    assert not context_keeps("engine/krypkasino/play.py", generic)
    named = parse(["engine/**", "!engine/krypkasino/*.py"])
    assert context_keeps("engine/krypkasino/play.py", named)
    assert not context_keeps("engine/krypkasino/notes.txt", named)


@pytest.mark.parametrize("path", NEEDED + tracked(*COPIED))
def test_the_context_keeps_what_the_dockerfile_copies(path):
    """Every file git tracks in the copied folders, the client's metadata included."""
    assert (ROOT / path).exists(), path
    assert context_keeps(path), f"{path}: add its folder's line to .dockerignore"


@pytest.mark.parametrize("path", STRAYS)
def test_the_context_leaves_out_local_files_in_the_copied_folders(path):
    assert path.startswith(tuple(f"{folder}/" for folder in COPIED))
    assert context_excludes(path)


def _wheel_names(tmp_path: Path, project: Path) -> set[str]:
    """The files (``.dist-info`` aside) of the wheel that ``pip wheel`` builds of
    ``project`` with the venv's hatchling, as the Dockerfile installs it."""
    wheels = tmp_path / "wheels" / project.name
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip_wheel, "--wheel-dir", str(wheels), str(project)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    return {name for name in names if ".dist-info/" not in name}


def test_the_wheels_take_only_the_tracked_files_whatever_lies_beside_them(tmp_path):
    """``pip wheel .`` outside the image build packed ``service/dev.pem``, and the
    image build a ``service/creds.json``: hatchling goes by ``.gitignore``, which
    neither the context nor a copy has. The wheels hold what git tracks in the
    packages, and nothing of the strays written beside it."""
    source = tmp_path / "source"
    for path in ["pyproject.toml", *tracked(*COPIED), *STRAYS]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        if path in STRAYS:
            (source / path).write_text("secret\n")
        else:
            shutil.copy(ROOT / path, source / path)
    project = _wheel_names(tmp_path, source)
    client = _wheel_names(tmp_path, source / "clients" / "python")
    assert project == set(tracked("engine", "service"))
    package = "clients/python/src/"
    assert client == {path.removeprefix(package) for path in tracked(package)}
