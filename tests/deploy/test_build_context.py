"""What ``.dockerignore`` keeps out of the image's build context (docs/operations.md,
"The image").

The Dockerfile copies ``engine/``, ``service/`` and ``clients/python/`` whole, and the
project's wheel (hatchling) takes every file of ``engine/`` and ``service/``: without
``.gitignore`` in the context it cannot tell a stray file from a module. So whatever
the context holds under those folders lands in the final image's venv.

``context_excludes`` follows Docker's and Buildah's matcher (moby/patternmatcher): a
pattern is anchored at the context root, ``*`` and ``?`` stay within one path
segment, ``**`` spans any number of them, ``!`` re-includes, the last match wins,
and a path is excluded when it or a folder above it is. It was checked once against
``podman build`` (Podman 4.3): the files below under ``service/``, ``engine/`` and
``clients/python/`` reached the context with the root-only patterns and not with
``**/`` ones, which is what these tests hold.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.deploy.manifests import ROOT

DOCKERIGNORE = ROOT / ".dockerignore"


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


def patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """``(excludes, regex)`` of each pattern, in file order (comments and blanks skipped)."""
    result = []
    for line in DOCKERIGNORE.read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        excludes = not text.startswith("!")
        result.append((excludes, _regex(text.lstrip("!").strip("/"))))
    return result


def context_excludes(path: str) -> bool:
    """Whether the build context leaves out ``path`` (relative, ``/``-separated)."""
    segments = path.split("/")
    prefixes = ["/".join(segments[: n + 1]) for n in range(len(segments))]
    excluded = False
    for excludes, regex in patterns():
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            excluded = excludes
    return excluded


#: Files the Dockerfile copies: they must stay in the context.
NEEDED = [
    "requirements/runtime.lock",
    "pyproject.toml",
    "engine/__init__.py",
    "service/config.py",
    "service/cardrules.openapi.json",
    "clients/python/pyproject.toml",
    "clients/python/README.md",  # the client's pyproject.toml names it as its readme
    "clients/python/src/cardrules/client/__init__.py",
]

#: Local files that would end in the image's venv if the context took them: secrets,
#: test and tool caches, a virtual environment, bytecode of the machine that built it.
STRAYS = [
    "service/dev.pem",
    "service/tls.key",
    "service/.env",
    "engine/.hypothesis/examples/x",
    "engine/.pytest_cache/v/cache/nodeids",
    "service/.mypy_cache/3.11/service/config.data.json",
    "service/.ruff_cache/CACHEDIR.TAG",
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


@pytest.mark.parametrize("path", NEEDED)
def test_the_context_keeps_what_the_dockerfile_copies(path):
    assert (ROOT / path).exists(), path
    assert not context_excludes(path)


@pytest.mark.parametrize("path", STRAYS)
def test_the_context_leaves_out_local_files_in_the_copied_folders(path):
    assert context_excludes(path)


def test_the_wheel_leaves_out_keys_left_in_the_working_tree(tmp_path):
    """``pip wheel .`` outside the image build packed ``service/dev.pem`` and an ``.env``:
    hatchling goes by ``.gitignore``, not ``.dockerignore`` (a release review)."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    for package in ("engine", "service"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    secrets = [path for path in STRAYS if path.endswith((".pem", ".key", ".env"))]
    for path in [*secrets, "engine/keys/signing.key"]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text("secret\n")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip_wheel, "--wheel-dir", str(tmp_path / "wheels"), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheels").glob("*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()
    assert "service/cardrules.openapi.json" in shipped and "engine/__init__.py" in shipped
    assert [name for name in shipped if name.endswith((".pem", ".key", ".env"))] == []
