"""Build hook for the optional C accelerators: the Kafka record codec and the RocketMQ batch append.

Everything else is declared in pyproject.toml.  ``optional=True``: where no C
compiler is available the install still succeeds and segstore_kafka.batch /
segstore_rocketmq.fastappend use their pure-Python loops (same results, slower).
"""

import zlib
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent
#: The header of helpers both accelerators include (segstore/speedups_common.h).
COMMON_HEADER = ROOT / "segstore" / "speedups_common.h"


def parts(path: str) -> list[str]:
    """The files a module's ``_speedups.c`` includes, one per concern: every ``_speedups_*.c`` beside
    it, sorted (``segstore.speedups.source_files``)."""
    source = ROOT.joinpath(path)
    return sorted(str(p.relative_to(ROOT)) for p in source.parent.glob(source.stem + "_*.c"))


def source_hash(path: str) -> tuple[str, str]:
    """The macro that stamps a build with its C source, the files it includes and the shared header
    (``segstore.speedups.source_hash``), so that a module built from other source than what sits
    beside it is found stale at import.  Each extension depends on this file too: a change of the
    stamp's recipe rebuilds both (``build_ext`` compares file times, not macros)."""
    data = b"".join(ROOT.joinpath(p).read_bytes() for p in [path, *parts(path)]) + COMMON_HEADER.read_bytes()
    digest = f"{zlib.crc32(data):08x}{len(data) & 0xFFFFFFFF:08x}"
    return ("SEGSTORE_SOURCE_HASH", f'"{digest}"')


setup(
    ext_modules=[
        Extension(
            "segstore_kafka._speedups",
            ["formats/segstore_kafka/_speedups.c"],
            define_macros=[source_hash("formats/segstore_kafka/_speedups.c")],
            include_dirs=["segstore"],
            depends=["segstore/speedups_common.h", *parts("formats/segstore_kafka/_speedups.c"), "setup.py"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
            optional=True,
        ),
        Extension(
            "segstore_rocketmq._speedups",
            ["formats/segstore_rocketmq/_speedups.c"],
            define_macros=[source_hash("formats/segstore_rocketmq/_speedups.c")],
            include_dirs=["segstore"],
            depends=["segstore/speedups_common.h", *parts("formats/segstore_rocketmq/_speedups.c"),
                     "setup.py"],
            libraries=["z"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
            optional=True,
        ),
    ]
)
