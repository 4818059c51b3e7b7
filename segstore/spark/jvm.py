"""The columnar JVM reader's jar, compiled here from the Java sources beside this module.

No download: the JDK's ``javac --release 17`` compiles ``segstore/spark/java`` against
the jars the installed PySpark ships (``pyspark/jars``: spark-sql, spark-catalyst,
arrow-vector...), on first use, and the jar is cached by the hash of its sources and
the Spark version under ``$SEGSTORE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/segstore``,
else ``~/.cache/segstore``).  :func:`session_jar` is what ``local_session`` puts on the
classpath; ``python -m segstore.spark.jvm`` prints the jar's path for
``spark-submit --jars`` / ``spark.jars`` on a cluster.

Where there is no ``javac`` or no PySpark jars (or ``SEGSTORE_SPARK_JVM=0``),
:func:`session_jar` returns None after a one-time notice, and PySpark's Python data
source (:mod:`.datasource`) reads instead.  The build's temporary class files live in
a temporary directory; the jar is written atomically (:func:`segstore.files.write_atomic`).
Thread-safe; concurrent builds in several processes write the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

from .. import files
from ..errors import MissingDependencyError, SegstoreError

JAVA_DIR = Path(__file__).with_name("java")
#: Set to ``0`` to keep the JVM reader off (``local_session`` then reads through Python).
DISABLE_ENV = "SEGSTORE_SPARK_JVM"
#: The JVM class that registers the ``segstore`` short name (META-INF/services).
SOURCE_CLASS = "segstore.spark.SegstoreSource"
_JAVA_RELEASE = "17"

_noticed = False


class JarBuildError(SegstoreError):
    """javac refused the JVM reader's sources (against this PySpark's jars)."""


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def spark_jars_dir() -> Path:
    """The directory of jars the installed PySpark runs Spark with."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _sources() -> list[Path]:
    return sorted(p for p in JAVA_DIR.rglob("*") if p.is_file())


def source_hash() -> str:
    """The first 16 hex digits of the SHA-256 of every file of ``java/`` (names and bytes)."""
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.relative_to(JAVA_DIR).as_posix().encode() + b"\0")
        digest.update(files.read_bytes(path))
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    explicit = os.environ.get("SEGSTORE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "segstore"


def jar_path() -> Path:
    """Where the jar of these sources for the installed Spark is (or will be) cached."""
    return cache_dir() / f"segstore-spark-{spark_version()}-{source_hash()}.jar"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    found = shutil.which("javac")
    if found is None:
        raise MissingDependencyError("no javac: the columnar JVM reader is compiled with the JDK's javac "
                                     "(Java 17 or newer); install a JDK or set JAVA_HOME")
    return found


def build(*, force: bool = False) -> Path:
    """The jar, compiled now unless the cache already holds it (or ``force``).

    Takes a few seconds (javac); O(1) when cached.

    :raises MissingDependencyError: no javac, or no PySpark jars.
    :raises JarBuildError: javac failed (its output is in the message).
    """
    target = jar_path()
    if target.exists() and not force:
        return target
    jars = spark_jars_dir()
    if not jars.is_dir():
        raise MissingDependencyError(f"{jars}: expected the jars of an installed PySpark, found no directory")
    javac = _javac()
    java_files = [str(p) for p in _sources() if p.suffix == ".java"]
    with tempfile.TemporaryDirectory(prefix="segstore-javac-") as classes:
        result = subprocess.run(
            [javac, "--release", _JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8",
             "-cp", str(jars / "*"), "-d", classes, *java_files],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise JarBuildError(f"javac failed on the JVM reader's sources (Spark {spark_version()}, jars in "
                                f"{jars}):\n{result.stdout}{result.stderr}", str(JAVA_DIR))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: segstore\r\n\r\n")
            for path in sorted(Path(classes).rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
            for path in _sources():
                if path.suffix != ".java":
                    jar.write(path, path.relative_to(JAVA_DIR).as_posix())
    files.make_dirs(target.parent)
    files.write_atomic(target, buffer.getvalue(), fsync=False)
    return target


def session_jar() -> Path | None:
    """The jar for a new session (built if needed), or None where it cannot be had.

    None when ``SEGSTORE_SPARK_JVM=0``, or, after a one-time notice saying how to get
    the fast path, when there is no javac or the build fails.
    """
    if os.environ.get(DISABLE_ENV, "").strip() == "0":
        return None
    try:
        return build()
    except SegstoreError as err:
        notice(f"{err}")
        return None


def notice(reason: str) -> None:
    """Say once per process that Spark reads through the (slower) Python data source, and why."""
    global _noticed
    if _noticed:
        return
    _noticed = True
    warnings.warn(f"segstore: Spark reads through PySpark's Python data source, which is several times "
                  f"slower than the columnar JVM reader: {reason}. The reader's jar is built from the "
                  f"installed sources with `python -m segstore.spark.jvm` (JDK 17 javac needed); pass its "
                  f"path as spark.jars (local_session() does this itself).", stacklevel=3)


def main() -> None:
    """``python -m segstore.spark.jvm``: print the jar's path (building it if needed)."""
    try:
        print(build(force="--force" in sys.argv[1:]))
    except SegstoreError as err:
        print(f"segstore: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
