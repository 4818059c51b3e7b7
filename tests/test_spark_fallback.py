"""The JVM reader's jar (built here with javac, cached) and the Python data source where it cannot be had."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import pytest
from spark_support import FIXTURES, fixture_config, library_rows

pytest.importorskip("pyspark")

from segstore.spark import jvm


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty jar cache and no notice given yet in this process."""
    monkeypatch.setenv("SEGSTORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(jvm, "_noticed", False)
    return tmp_path / "cache"


def test_build_compiles_the_sources_against_pyspark_jars_once(fresh):
    jar = jvm.build()
    assert jar.parent == fresh and jar.name == f"segstore-spark-{jvm.spark_version()}-{jvm.source_hash()}.jar"
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        services = archive.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
    assert services.decode().strip() == jvm.SOURCE_CLASS
    assert {"segstore/spark/SegstoreSource.class", "segstore/spark/ArrowBatchReader.class"} <= names
    built = jar.stat().st_mtime_ns
    assert jvm.build() == jar and jar.stat().st_mtime_ns == built      # cached: not compiled again
    assert jvm.session_jar() == jar


def test_no_javac_means_the_python_source_and_one_notice(fresh, monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.warns(UserWarning, match=r"Python data source.*no javac.*python -m segstore.spark.jvm"):
        assert jvm.session_jar() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jvm.session_jar() is None          # said once per process


def test_the_jvm_reader_can_be_turned_off(fresh, monkeypatch):
    monkeypatch.setenv(jvm.DISABLE_ENV, "0")
    assert jvm.session_jar() is None
    assert not fresh.exists()       # nothing built


def test_the_jar_command_prints_its_path(fresh):
    result = subprocess.run([sys.executable, "-m", "segstore.spark.jvm"], capture_output=True, text=True,
                            env={**os.environ, "SEGSTORE_CACHE_DIR": str(fresh)}, check=True, timeout=300)
    assert result.stdout.strip() == str(jvm.jar_path())
    assert "Warning" not in result.stderr     # the package did not import the module before runpy ran it
    assert os.path.isfile(result.stdout.strip())


_WITHOUT_JAR = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        from segstore.spark import jvm_source_loaded, local_session
        spark = local_session("segstore-fallback", cores=1)
    path, config = sys.argv[1], sys.argv[2]
    count = spark.read.format("segstore").option("config", config).load(path).count()
    try:
        spark.read.format("segstore").option("reader", "jvm").load(path).count()
        refused = ""
    except Exception as err:
        refused = str(err)
    print(json.dumps({"loaded": jvm_source_loaded(spark), "count": count, "refused": refused,
                      "notices": [str(w.message) for w in caught if "segstore" in str(w.message)]}))
    spark.stop()
""")


@pytest.mark.spark
def test_a_session_without_the_jar_reads_through_python(tmp_path):
    path = FIXTURES / "kafka" / "uncompressed" / "topic-0"
    config = fixture_config(path)
    env = {**os.environ, jvm.DISABLE_ENV: "0", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run([sys.executable, "-c", _WITHOUT_JAR, str(path), json.dumps(config)], env=env,
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["loaded"] is False
    assert answer["count"] == len(library_rows(path, config)) > 0
    assert "reader=jvm" in answer["refused"] and "python -m segstore.spark.jvm" in answer["refused"]
    assert len(answer["notices"]) == 1 and "not on this session's classpath" in answer["notices"][0]
