"""Which jars a config needs, and where each comes from: a jars directory, the checkout's cache, or Maven."""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from spark_sink import classpath
from spark_sink.classpath import AWS_BUNDLE, ICEBERG_RUNTIME, MARIADB_DRIVER, POSTGRESQL_DRIVER
from spark_sink.errors import SparkSetupError
from spark_sink.session import session_conf
from spark_sink.settings import SparkSettings

PLAIN = SparkSettings(master="local[1]", warehouse="/w", spill_dir="/s")
JDBC_CATALOG = {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.lake.type": "jdbc", "spark.sql.catalog.lake.warehouse": "s3://bucket/lake"}


def needed(settings: SparkSettings) -> list[classpath.Jar]:
    return [need.jar for need in classpath.needs(settings)]


def jar(path: Path, *classes: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in classes:
            archive.writestr(name, b"\xca\xfe\xba\xbe")
    return path


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    """This code as pip installs it: no Makefile beside the package, a decoder jar inside it."""
    monkeypatch.delenv("CANALBRIDGE_CACHE", raising=False)
    monkeypatch.setattr(classpath, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(classpath, "PACKAGED", tmp_path / "site-packages" / "spark_sink" / "jars")
    classpath.PACKAGED.mkdir(parents=True)
    jar(classpath.PACKAGED / classpath.DECODER_JAR, "canalbridge/spark/RowChangeDecoder.class")
    return classpath.PACKAGED / classpath.DECODER_JAR


def test_a_plain_config_needs_only_the_iceberg_runtime():
    assert needed(PLAIN) == [ICEBERG_RUNTIME]


def test_a_snapshot_needs_mariadbs_driver_and_a_jdbc_catalog_on_postgresql_its_own():
    assert needed(replace(PLAIN, reads_sources=True)) == [ICEBERG_RUNTIME, MARIADB_DRIVER]
    on_postgres = replace(PLAIN, conf={**JDBC_CATALOG, "spark.sql.catalog.lake.uri": "jdbc:postgresql://db/cat"})
    assert needed(on_postgres) == [ICEBERG_RUNTIME, POSTGRESQL_DRIVER, AWS_BUNDLE]
    on_mariadb = replace(on_postgres, conf={**JDBC_CATALOG, "spark.sql.catalog.lake.uri": "jdbc:mysql://db/cat"},
                         reads_sources=True)
    assert needed(on_mariadb) == [ICEBERG_RUNTIME, MARIADB_DRIVER, AWS_BUNDLE]  # one driver for both


def test_s3_is_known_by_the_warehouse_or_the_file_io():
    io = replace(PLAIN, conf={"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
                              "spark.sql.catalog.lake.type": "rest",
                              "spark.sql.catalog.lake.io-impl": "org.apache.iceberg.aws.s3.S3FileIO"})
    assert AWS_BUNDLE in needed(io)
    assert AWS_BUNDLE in needed(replace(PLAIN, warehouse="s3a://bucket/w"))


def test_only_an_iceberg_spark_runtime_of_the_users_stands_in_for_ours():
    bundle_only = replace(PLAIN, conf={"spark.jars.packages": AWS_BUNDLE.coordinates})
    assert ICEBERG_RUNTIME in needed(bundle_only)
    runtime = replace(PLAIN, conf={"spark.jars": "/opt/jars/iceberg-spark-runtime-3.5_2.12-1.10.1.jar"})
    assert ICEBERG_RUNTIME not in needed(runtime)


def test_installed_the_needed_jars_are_maven_coordinates_and_the_decoder_comes_from_the_package(installed):
    conf = session_conf(replace(PLAIN, reads_sources=True,
                                conf={"spark.jars.packages": AWS_BUNDLE.coordinates}))
    assert conf["spark.jars.packages"].split(",") == [AWS_BUNDLE.coordinates, ICEBERG_RUNTIME.coordinates,
                                                      MARIADB_DRIVER.coordinates]
    assert conf["spark.jars"] == str(installed)


def test_an_installation_without_the_decoder_jar_refuses_to_start(installed):
    installed.unlink()
    with pytest.raises(SparkSetupError, match=r"no decoder jar .* install a wheel built by `make dist`"):
        session_conf(PLAIN)


def test_a_jars_dir_supplies_every_jar_and_one_it_lacks_is_named_with_its_coordinates(installed, tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    runtime = jar(jars / "iceberg-spark-runtime.jar", ICEBERG_RUNTIME.probe)
    catalog = jar(jars / "my-catalog.jar", "com/example/Catalog.class")  # a jar no need names joins too
    settings = replace(PLAIN, reads_sources=True, jars_dir=str(jars))
    with pytest.raises(SparkSetupError) as refused:
        session_conf(settings)
    assert str(refused.value) == (
        f"spark.jars_dir {jars} lacks MariaDB's JDBC driver ({MARIADB_DRIVER.coordinates}, needed because a "
        f"[job.snapshot] reads its source's tables through Spark)")
    driver = jar(jars / "driver.jar", MARIADB_DRIVER.probe)
    conf = session_conf(settings)
    assert conf["spark.jars"].split(",") == [str(installed), str(driver), str(runtime), str(catalog)]
    assert "spark.jars.packages" not in conf


def test_a_jars_dir_that_is_not_a_directory_is_named(installed, tmp_path):
    with pytest.raises(SparkSetupError, match=r"spark.jars_dir .*nowhere is not a directory"):
        session_conf(replace(PLAIN, jars_dir=str(tmp_path / "nowhere")))


def test_a_jar_the_users_packages_name_in_another_version_is_not_asked_for_again(installed):
    mine = "org.mariadb.jdbc:mariadb-java-client:3.4.1"
    conf = session_conf(replace(PLAIN, reads_sources=True, conf={"spark.jars.packages": mine}))
    assert conf["spark.jars.packages"].split(",") == [mine, ICEBERG_RUNTIME.coordinates]
