"""Shared test fixtures: paths of the compat fixtures and copies that tests may modify."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "compat_fixtures"
ROCKETMQ_FIXTURES = sorted(p.name for p in (FIXTURES / "rocketmq").iterdir() if p.is_dir())
KAFKA_FIXTURES = sorted(p.name for p in (FIXTURES / "kafka").iterdir() if p.is_dir())

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` decodes as UTF-8 (a text a string column or a header key can hold)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def copy_writable(src: Path, dst: Path) -> Path:
    """Copy a fixture tree so a test may modify it (the originals are read-only)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in dirnames + filenames:
            os.chmod(os.path.join(dirpath, name), 0o755 if name in dirnames else 0o644)
    return dst


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
