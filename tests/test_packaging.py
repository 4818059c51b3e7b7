"""The source distribution is complete: its own tests run from it (issue 14, "Packaging").

Builds the sdist with the project's real build backend (``python -m build --sdist``), unpacks it
and checks that every file git tracks under the directories the tests need is inside, then runs
the fixture tests of both formats from the unpacked tree, on the unpacked tree's own code (pure
Python: an sdist ships no compiled accelerators).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What the tests read besides the packages: the suite and its helpers, the broker fixtures, the
#: docs the tests check, and the scripts of the README's two commands.
NEEDED = ("tests", "compat_fixtures", "docs", "scripts", "benchmarks", "segstore/spark/java")


@pytest.fixture(scope="module")
def sdist_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    # --no-isolation: build with the venv's setuptools (a test extra) instead of fetching one.
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (archive,) = out.glob("segstore-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    (tree,) = (p for p in out.iterdir() if p.is_dir())
    return tree


def _tracked(directory: str) -> list[str]:
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", directory],
                             capture_output=True, text=True)
    if listing.returncode != 0:
        pytest.skip("not a git checkout: nothing to compare the sdist with")
    return [line for line in listing.stdout.splitlines() if line]


@pytest.mark.parametrize("directory", NEEDED)
def test_sdist_holds_every_tracked_file(sdist_tree: Path, directory: str) -> None:
    tracked = _tracked(directory)
    assert tracked, f"git tracks nothing under {directory}/"
    missing = [name for name in tracked if not (sdist_tree / name).is_file()]
    assert missing == []


def test_sdist_ships_no_build_outputs(sdist_tree: Path) -> None:
    junk = [str(p.relative_to(sdist_tree)) for p in sdist_tree.rglob("*")
            if p.suffix in (".so", ".pyc") or p.name == "__pycache__"]
    assert junk == []


def test_fixture_tests_run_from_the_sdist(sdist_tree: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{sdist_tree}{os.pathsep}{sdist_tree / 'formats'}",
           "SEGSTORE_PURE_PYTHON": "1"}
    probe = subprocess.run([sys.executable, "-c", "import segstore, segstore_rocketmq; "
                            "print(segstore.__file__); print(segstore_rocketmq.__file__)"],
                           cwd=sdist_tree, env=env, capture_output=True, text=True, check=True)
    assert all(line.startswith(str(sdist_tree)) for line in probe.stdout.splitlines())
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_rocketmq_fixtures.py", "tests/test_kafka_fixtures.py"],
                         cwd=sdist_tree, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout


def test_an_installed_package_holds_no_c_source(sdist_tree: Path, tmp_path: Path) -> None:
    """What a wheel installs from the sdist (``build_py``: the packages and their data) holds py.typed
    and the Spark source's Java files but none of the accelerators' C sources, which the sdist keeps
    to build them: beside an installed build, each command's import would hash them to find a stale
    build (:func:`segstore.speedups.stale`: OpenSSL's hashlib and 0.3 MB read, 3-5 ms a command)."""
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")],
                   cwd=sdist_tree, check=True, capture_output=True, timeout=120)
    lib = tmp_path / "lib"
    installed = {p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file()}
    assert [name for name in installed if name.endswith((".c", ".h"))] == []
    assert {"segstore/py.typed", "segstore_kafka/py.typed", "segstore_rocketmq/py.typed",
            "segstore_kafka/batch.py", "segstore/spark/java/segstore/spark/SegstoreTable.java"} <= installed
    assert (sdist_tree / "formats/segstore_kafka/_speedups.c").is_file()
    assert (sdist_tree / "segstore/speedups_common.h").is_file()
