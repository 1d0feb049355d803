"""The committed generated code and vendored protos match a fresh generation (design section 1)."""

from __future__ import annotations

from pathlib import Path

import google.api

from scripts.generate_protos import DEFAULT_OUTPUT, THIRD_PARTY, generate


def test_committed_code_matches_fresh_generation(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    assert fresh, "the generator wrote nothing"
    for path in fresh:
        relative = path.relative_to(tmp_path)
        committed = DEFAULT_OUTPUT / relative
        assert committed.exists(), f"{relative} is generated but not committed: run make generate"
        assert committed.read_bytes() == path.read_bytes(), f"{relative} differs: run make generate"
    stale = {
        p.relative_to(DEFAULT_OUTPUT)
        for p in DEFAULT_OUTPUT.rglob("*_pb2*.py*")
        if not (tmp_path / p.relative_to(DEFAULT_OUTPUT)).exists()
    }
    assert not stale, f"generated files without a proto: {sorted(map(str, stale))}"


def test_vendored_googleapis_protos_match_the_pinned_package() -> None:
    package_dir = Path(next(iter(google.api.__path__)))
    for vendored in (THIRD_PARTY / "google" / "api").glob("*.proto"):
        assert vendored.read_bytes() == (package_dir / vendored.name).read_bytes(), vendored.name
