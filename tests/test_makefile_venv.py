"""The Makefile's venv rule refuses what would fail later, with one line that says what
to do: an interpreter older than pyproject.toml's ``requires-python``, and a lock that
no longer holds what pyproject.toml asks for (README, "The two commands"). A venv made
in another directory (a copied or moved checkout) is made again.

The rule runs in a copy of the Makefile with stand-in interpreters (shell scripts), so
no venv is made and nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def _project(tmp_path: Path) -> Path:
    """The Makefile and the files its venv rule depends on, in a folder of their own."""
    for name in ("Makefile", "pyproject.toml", "requirements/dev.lock"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def _base_python(folder: Path) -> Path:
    """A stand-in Python 3.11 whose ``-m venv DIR`` makes a venv whose python (and so its
    pip) succeeds at everything."""
    return _script(
        folder / "python3.11",
        'case "$1" in\n'
        '  --version) echo "Python 3.11.7";;\n'
        '  -m) mkdir -p "$3/bin" && printf \'#!/bin/sh\\nexit 0\\n\' >"$3/bin/python"'
        ' && chmod +x "$3/bin/python";;\n'
        "esac\nexit 0\n",
    )


def _with_venv(project: Path, python: str) -> Path:
    """A venv made here (``python`` its stand-in interpreter), older than pyproject.toml
    but newer than the lock: the rule re-applies the lock to it and makes no new venv
    (make's ``$?`` names pyproject.toml alone)."""
    _script(project / ".venv/bin/python", python)
    (project / ".venv/.directory").write_text(f"{project}\n")
    stamp = project / ".venv/.installed"
    stamp.touch()
    now = time.time()
    os.utime(project / "requirements/dev.lock", (now - 20, now - 20))
    os.utime(stamp, (now - 10, now - 10))
    return stamp


def _make_venv(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args, "venv"],
        cwd=project,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _up_to_date(project: Path) -> bool:
    """Whether ``make venv`` would do nothing (``make -q``'s exit status 0)."""
    asked = subprocess.run(
        ["make", "-q", ".venv/.installed"],
        cwd=project,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return asked.returncode == 0


def test_an_interpreter_older_than_3_11_is_refused_naming_its_version(tmp_path: Path) -> None:
    """pip used to fail instead, with "No matching distribution found for coverage" and
    some two hundred versions, after making a venv of the old interpreter."""
    project = _project(tmp_path)
    # Answers the version check as Python 3.10 does (exit status 1) and --version as it.
    old = _script(
        tmp_path / "python3.10", 'case "$1" in --version) echo "Python 3.10.13";; esac\nexit 1\n'
    )
    done = _make_venv(project, f"PYTHON={old}")
    assert done.returncode != 0
    assert f"cardrules needs Python 3.11 or newer, and {old} is Python 3.10.13" in done.stderr
    assert not (project / ".venv").exists()


def test_a_missing_interpreter_is_refused_as_not_found(tmp_path: Path) -> None:
    done = _make_venv(_project(tmp_path), f"PYTHON={tmp_path / 'nowhere' / 'python3'}")
    assert done.returncode != 0
    assert "is not found: make PYTHON=/path/to/python3.11" in done.stderr


def test_a_lock_missing_a_dependency_of_pyproject_is_refused_asking_for_make_lock(
    tmp_path: Path,
) -> None:
    """``pip check`` runs after the installs: a dependency added to pyproject.toml but not
    to the lock used to pass ``make venv`` and fail at its first import."""
    project = _project(tmp_path)
    # pip installs anything; pip check finds a gap.
    stamp = _with_venv(
        project,
        'if [ "$3" = check ]; then echo "cardrules 0.1.0 requires left-pad, which is not'
        ' installed."; exit 1; fi\nexit 0\n',
    )
    before = stamp.stat().st_mtime
    done = _make_venv(project)
    assert done.returncode != 0
    assert "creating .venv" not in done.stdout
    assert "requires left-pad, which is not installed." in done.stderr
    assert "requirements/dev.lock does not hold what pyproject.toml asks for: make lock" in (
        done.stderr
    )
    assert stamp.stat().st_mtime == before


def test_a_lock_that_holds_everything_renews_the_stamp(tmp_path: Path) -> None:
    """The control: the same stand-in venv with a pip check that passes."""
    project = _project(tmp_path)
    stamp = _with_venv(project, "exit 0\n")
    before = stamp.stat().st_mtime
    done = _make_venv(project)
    assert done.returncode == 0, done.stderr
    assert "creating .venv" not in done.stdout
    assert stamp.stat().st_mtime > before


@pytest.mark.parametrize("how", ["copied", "moved"])
def test_a_venv_made_in_another_directory_is_made_again(tmp_path: Path, how: str) -> None:
    """A copied checkout's .venv ran the first tree's code (its scripts' ``#!`` lines and
    the editable installs' .pth files name that tree) and ``make venv`` said nothing to
    do; a moved one's ``make serve`` failed with ``.venv/bin/cardrules: No such file``."""
    python = _base_python(tmp_path)
    first = _project(tmp_path / "first")
    made = _make_venv(first, f"PYTHON={python}")
    assert made.returncode == 0, made.stderr
    assert "creating .venv" in made.stdout
    assert _up_to_date(first)

    second = tmp_path / "second"
    if how == "copied":
        subprocess.run(["cp", "-a", str(first), str(second)], check=True)
    else:
        first.rename(second)
    again = _make_venv(second, f"PYTHON={python}")
    assert again.returncode == 0, again.stderr
    assert f"this .venv was made for {first}; making it again here\n" in again.stdout
    assert "creating .venv" in again.stdout
    assert (second / ".venv/.directory").read_text() == f"{second}\n"
    assert _up_to_date(second)
    if how == "copied":
        assert _up_to_date(first)


def test_a_venv_that_does_not_record_its_directory_is_made_again(tmp_path: Path) -> None:
    """A venv made before the Makefile recorded where: it may be a copy."""
    python = _base_python(tmp_path)
    project = _project(tmp_path / "project")
    _with_venv(project, "exit 0\n")
    (project / ".venv/.directory").unlink()
    done = _make_venv(project, f"PYTHON={python}")
    assert done.returncode == 0, done.stderr
    assert "this .venv was made for a directory it does not record; making it again here\n" in (
        done.stdout
    )
    assert (project / ".venv/.directory").read_text() == f"{project}\n"


def test_a_venv_whose_python_cannot_start_is_not_blamed_on_the_lock(tmp_path: Path) -> None:
    """Under LC_ALL=C, Python 3.11 reads .pth files as ASCII: once the editable installs
    wrote theirs naming a non-ASCII checkout, the venv's python stopped at start, and
    pip check's failure asked for ``make lock``, which did not help."""
    project = _project(tmp_path)
    # Starts until the editable installs, then fails as Python does there.
    stamp = _with_venv(
        project,
        f'if [ -e {tmp_path}/pth ]; then echo "Fatal Python error: init_import_site:'
        ' Failed to import the site module" >&2; exit 1; fi\n'
        f'case "$*" in *"-e ."*) touch {tmp_path}/pth;; esac\nexit 0\n',
    )
    before = stamp.stat().st_mtime
    done = _make_venv(project, env={"LC_ALL": "C"})
    assert done.returncode != 0
    assert "Fatal Python error: init_import_site" in done.stderr
    assert "make: .venv's python cannot start (see above)\n" in done.stderr
    assert "if this checkout's path is not ASCII, run LC_ALL=C.UTF-8 make venv\n" in done.stderr
    assert "make lock" not in done.stderr
    assert stamp.stat().st_mtime == before

    # A second run stops before the installs, saying the same.
    again = _make_venv(project, env={"LC_ALL": "C.UTF-8"})
    assert again.returncode != 0
    assert again.stderr.startswith("Fatal Python error: init_import_site")
    assert "make: .venv's python cannot start (see above)\n" in again.stderr
    assert "LC_ALL=C.UTF-8" not in again.stderr
    assert "pip install" not in again.stdout


def _without_home_settings() -> dict[str, str]:
    """The environment with no variable that moves buf's or npm's files out of HOME."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("BUF_", "XDG_", "npm_config_", "NPM_CONFIG_"))
    }


def test_buf_runs_through_make_where_home_is_no_directory(tmp_path: Path) -> None:
    """With HOME=/dev/null (or an unwritable HOME), ``buf lint`` failed: it makes its
    cache in $HOME/.cache and reads its config from $HOME/.config. The Makefile exports
    BUF_CACHE_DIR and BUF_CONFIG_DIR to every recipe, the tests' pytest included."""
    buf = ROOT / "node_modules" / ".bin" / "buf"
    assert buf.exists(), f"{buf} is missing: run `npm ci` (make test does)"
    project = _project(tmp_path)
    shutil.copy(ROOT / "buf.yaml", project)
    shutil.copytree(ROOT / "proto", project / "proto")
    shutil.copytree(ROOT / "third_party", project / "third_party")
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "--eval",
            "buf-lint: ; $(BUF) lint",
            f"BUF={buf}",
            "buf-lint",
        ],
        cwd=project,
        env={**_without_home_settings(), "HOME": "/dev/null"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (project / ".venv/buf-cache").is_dir()


def test_npm_ci_keeps_its_cache_in_the_venv(tmp_path: Path) -> None:
    """``npm ci`` failed with ``ENOENT mkdir $HOME/.npm`` where HOME was unwritable. A
    stand-in npm (the real one would fetch buf) makes its cache where npm would: in
    npm_config_cache, else $HOME/.npm."""
    project = _project(tmp_path / "project")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / name, project)
    _with_venv(project, "exit 0\n")
    _script(
        tmp_path / "bin/npm",
        'mkdir -p "${npm_config_cache:-$HOME/.npm}/_logs" || exit 1\nmkdir -p node_modules\n',
    )
    done = subprocess.run(
        ["make", "--no-print-directory", "node_modules/.installed"],
        cwd=project,
        env={
            **_without_home_settings(),
            "HOME": "/dev/null",
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (project / ".venv/npm-cache/_logs").is_dir()


@pytest.mark.parametrize(
    ("name", "hostile", "given"),
    [
        # pip refused: "Can not perform a '--user' install. User site-packages are not
        # visible in this virtualenv." pip.conf's `user = true` did the same; PIP_USER
        # overrides any config file.
        ("PIP_USER", "1", "0"),
        # The venv's pip (23.2.1) stopped at "DeprecationWarning: pkg_resources is
        # deprecated as an API".
        ("PYTHONWARNINGS", "error", ""),
    ],
    ids=["PIP_USER", "PYTHONWARNINGS"],
)
def test_every_pip_run_of_the_venv_rule_is_shielded_from_the_callers_setting(
    tmp_path: Path, name: str, hostile: str, given: str
) -> None:
    project = _project(tmp_path / "project")
    log = tmp_path / "pip.log"
    _with_venv(
        project,
        f'if [ "$1 $2" = "-m pip" ]; then echo "$3 ${{{name}-unset}}" >>{log}; fi\nexit 0\n',
    )
    done = _make_venv(project, env={name: hostile})
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        f"install {given}",
        f"install {given}",
        f"check {given}",
    ]
