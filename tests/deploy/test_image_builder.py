"""The Dockerfile's builder stage (docs/operations.md, "The image"): the build backend
it removes is the lock's, and the bytecode it writes is the same from the same inputs.

The uninstall list is spelt out in the Dockerfile, so a ``make lock`` that brings
hatchling a new dependency would leave it in the image (``pip check`` passes either
way), and one hatchling dropped would fail the build; the lock's ``# via`` comments
say which packages only the build needs.

pip writes timestamp-based ``.pyc`` files, whose header holds each source's mtime:
two ``--no-cache`` builds of the same inputs differed in 1,154 of them (a release
review). The builder installs with ``--no-compile`` and compiles the venv at the end
from the sources' hashes.

The final stage compiles the standard library the same way: the official base deletes
every ``.pyc`` under ``/usr/local``, and with ``PYTHONDONTWRITEBYTECODE`` and a read-only
root each start and each ``HEALTHCHECK`` compiled what it imports from source, about
twice the CPU (a container review; Debian's Python, the local stand-in, ships them).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.deploy.manifests import ROOT, dockerfile_instructions, final_stage

LOCK = ROOT / "requirements" / "runtime.lock"

#: The installers, which come with the venv (not from the lock) and go last.
INSTALLERS = {"pip", "setuptools"}


def builder_commands() -> list[list[str]]:
    """The shell commands of the builder stage's ``RUN`` lines, split on ``&&``."""
    instructions = dockerfile_instructions()
    final = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return [
        shlex.split(command)
        for name, arguments in instructions[:final]
        if name == "RUN"
        for command in arguments.split("&&")
    ]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_sources(text: str) -> dict[str, set[str]]:
    """Each locked package and what pip-compile says needs it (its ``# via`` lines)."""
    sources: dict[str, set[str]] = {}
    current = ""
    in_via = False
    for line in text.splitlines():
        if pinned := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line):
            current = _normalized(pinned[1])
            sources[current] = set()
            in_via = False
        elif (via := re.match(r"^\s+# via(?: (.+))?$", line)) and current:
            in_via = True
            if via[1]:
                sources[current].add(via[1].strip())
        elif in_via and (more := re.match(r"^\s+#\s+(\S.*)$", line)):
            sources[current].add(more[1].strip())
        else:
            in_via = False
    return sources


def build_only(sources: dict[str, set[str]]) -> set[str]:
    """The packages that only the build needs: every source is the project's build
    system (``pyproject.toml::build-system...``) or another such package."""
    result: set[str] = set()
    changed = True
    while changed:
        changed = False
        for package, needed_by in sources.items():
            if package in result:
                continue
            if all(
                "::build-system" in source or _normalized(source.split()[0]) in result
                for source in needed_by
            ):
                result.add(package)
                changed = True
    return result


def uninstalled() -> set[str]:
    """Every package a ``pip uninstall`` of the builder removes."""
    names: set[str] = set()
    for command in builder_commands():
        if "uninstall" in command:
            after = command[command.index("uninstall") + 1 :]
            names |= {_normalized(word) for word in after if not word.startswith("-")}
    return names


#: pip-compile's layout: one source on the ``# via`` line, or several below it.
SAMPLE = """\
googleapis-common-protos==1.76.0 \\
    --hash=sha256:00
    # via
    #   cardrules (pyproject.toml)
    #   grpcio-status
hatchling==1.33.0 \\
    --hash=sha256:00
    # via cardrules (pyproject.toml::build-system.requires)
pathspec==1.1.1 \\
    --hash=sha256:00
    # via hatchling
typing-extensions==4.16.0 \\
    --hash=sha256:00
    # via
    #   grpcio
    #   hatchling
"""


def test_the_lock_is_read():
    sources = lock_sources(SAMPLE)
    assert sources == {
        "googleapis-common-protos": {"cardrules (pyproject.toml)", "grpcio-status"},
        "hatchling": {"cardrules (pyproject.toml::build-system.requires)"},
        "pathspec": {"hatchling"},
        "typing-extensions": {"grpcio", "hatchling"},
    }
    assert build_only(sources) == {"hatchling", "pathspec"}
    lock = lock_sources(LOCK.read_text())
    assert all(lock.values()), [name for name, needed_by in lock.items() if not needed_by]
    assert "hatchling" in build_only(lock)


def test_the_builder_uninstalls_exactly_what_only_the_build_needs():
    """Every package the lock holds for the build alone goes, and nothing the service
    runs with: a new hatchling dependency (``make lock --upgrade``) must join the
    list, and one that hatchling drops, or a runtime package comes to need, leave it."""
    lock = lock_sources(LOCK.read_text())
    assert uninstalled() - INSTALLERS == build_only(lock)
    assert uninstalled() >= INSTALLERS
    assert not INSTALLERS & set(lock)


def test_every_install_of_the_builder_leaves_the_bytecode_to_the_end():
    installs = [command for command in builder_commands() if "install" in command]
    assert len(installs) == 2, installs
    assert all("--no-compile" in command for command in installs), installs


def compile_command() -> list[str]:
    """The builder's last command: the venv's bytecode, compiled once."""
    last = builder_commands()[-1]
    assert last[1:4] == ["-m", "compileall", "-q"] and last[-1] == "/opt/venv", last
    return last


def test_the_bytecode_is_compiled_last_from_the_sources_hashes():
    command = compile_command()
    mode = command[command.index("--invalidation-mode") + 1]
    assert mode == "unchecked-hash"


def _compiled(tree: Path, mtime: int, arguments: list[str]) -> dict[str, bytes]:
    """The ``.pyc`` files that ``arguments`` write for a fresh copy of ``service/`` at
    ``tree``, its sources dated ``mtime``: the same path each time, as the builder's
    ``/opt/venv`` (the path is in the bytecode), at another time."""
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT / "service", tree, ignore=shutil.ignore_patterns("__pycache__"))
    for source in tree.rglob("*.py"):
        os.utime(source, (mtime, mtime))
    ran = subprocess.run(
        [sys.executable, *arguments, str(tree)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return {str(pyc.relative_to(tree)): pyc.read_bytes() for pyc in tree.rglob("*.pyc")}


def test_the_same_sources_compile_to_the_same_bytes_whatever_their_mtimes(tmp_path):
    """The Dockerfile's command, run twice on the same sources with different mtimes,
    writes identical ``.pyc`` files, flagged hash-based and unchecked (PEP 552); the
    timestamp-based ones pip writes differ, which shows the mtimes do."""
    arguments = compile_command()[1:-1]
    tree = tmp_path / "service"
    hashed = _compiled(tree, 1_700_000_000, arguments)
    assert hashed and hashed == _compiled(tree, 1_800_000_000, arguments)
    assert {int.from_bytes(pyc[4:8], "little") for pyc in hashed.values()} == {0b01}
    timestamp = ["-m", "compileall", "-q", "--invalidation-mode", "timestamp"]
    assert _compiled(tree, 1_700_000_000, timestamp) != _compiled(tree, 1_800_000_000, timestamp)


def stdlib_compile_command() -> str:
    """The final stage's command that compiles the standard library, as the shell reads
    it (its path is a command substitution, which ``shlex`` cannot split)."""
    (command,) = [
        command.strip()
        for name, arguments in final_stage()
        if name == "RUN"
        for command in arguments.split("&&")
        if "compileall" in command
    ]
    return command


def test_the_final_stage_compiles_the_standard_library_as_root_and_keeps_the_exit_status():
    stage = final_stage()
    (run,) = [i for i, (_, arguments) in enumerate(stage) if "compileall" in arguments]
    (user,) = [i for i, (name, _) in enumerate(stage) if name == "USER"]
    assert stage[run][0] == "RUN" and run < user  # the standard library is root's
    assert "||" not in stage[run][1]  # a file that does not compile fails the build


def test_the_standard_library_path_is_the_interpreters_own():
    """The substitution, run by a real shell, prints this interpreter's stdlib path:
    ``/usr/local/lib/python3.11`` on the official base, ``/usr/lib/python3.11`` on Debian."""
    command = stdlib_compile_command()
    assert command.endswith(')"'), command
    substitution = command[command.rindex('"$(') + 3 : -2]
    assert substitution.startswith("python -B ")  # -B: it writes no .pyc of its own
    ran = subprocess.run(
        ["sh", "-c", shlex.quote(sys.executable) + substitution.removeprefix("python")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert ran.stdout.strip() == sysconfig.get_path("stdlib")


#: The folders of the standard library the image does not compile.
EXCLUDED_STDLIB_FOLDERS = [
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "lib2to3",
    "ensurepip",
    "site-packages",
]


def _stdlib_tree(root: Path) -> Path:
    """A standard library in small: a module, a package, and a file that does not compile
    in each folder the image leaves out."""
    stdlib = root / "lib" / "python3.11"
    (stdlib / "json").mkdir(parents=True)
    (stdlib / "json" / "__init__.py").write_text("VALUE = 1\n")
    (stdlib / "contest.py").write_text("VALUE = 2\n")
    for left_out in EXCLUDED_STDLIB_FOLDERS:
        folder = stdlib / left_out / "sub"
        folder.mkdir(parents=True)
        (folder / "badsyntax.py").write_text("def broken(:\n")
    return stdlib


def _run_compileall(arguments: list[str], stdlib: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGUMENTS STDLIB`` with this interpreter."""
    return subprocess.run(
        [sys.executable, *arguments, str(stdlib)], capture_output=True, text=True, timeout=120
    )


def test_the_standard_library_is_compiled_from_its_hashes_without_the_left_out_folders(
    tmp_path,
):
    """The Dockerfile's arguments, run on a small standard library: the modules get
    unchecked hash-based ``.pyc`` files (PEP 552), the left-out folders none, and a file
    elsewhere that does not compile fails the command."""
    command = stdlib_compile_command()
    arguments = shlex.split(command[: command.rindex('"$(')])
    assert arguments[:2] == ["python", "-B"], arguments
    stdlib = _stdlib_tree(tmp_path)
    ran = _run_compileall(arguments[1:], stdlib)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    written = list(stdlib.rglob("*.pyc"))
    assert {str(pyc.relative_to(stdlib).parent.parent) for pyc in written} == {".", "json"}
    assert {int.from_bytes(pyc.read_bytes()[4:8], "little") for pyc in written} == {0b01}
    (stdlib / "json" / "broken.py").write_text("def broken(:\n")
    ran = _run_compileall(arguments[1:], stdlib)
    assert ran.returncode != 0 and "broken.py" in ran.stdout, ran.stdout
