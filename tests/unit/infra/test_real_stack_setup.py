"""The real-stack set-up agrees with itself, and a missing artifact names the make target that fetches it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from spark_sink import classpath, session
from spark_sink.settings import SparkSettings
from tests.infra import artifacts
from tests.infra.canal_server import canal_passwd

ROOT = Path(__file__).resolve().parents[3]


def makefile_value(name: str) -> str:
    match = re.search(rf"^{name} := (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, name
    return match.group(1)


def pom_property(pom: str, name: str) -> str:
    match = re.search(rf"<{re.escape(name)}>([^<]+)</", (ROOT / "deploy" / "maven" / pom / "pom.xml").read_text())
    assert match, (pom, name)
    return match.group(1)


def test_the_versions_agree_between_makefile_poms_and_dev_kit():
    assert makefile_value("CANAL_VERSION") == pom_property("canal", "canal.version") == artifacts.CANAL_VERSION
    assert makefile_value("ICEBERG_VERSION") == pom_property("iceberg", "iceberg.version") == classpath.ICEBERG_VERSION
    assert makefile_value("ICEBERG_JAR") == f"$(CACHE)/iceberg/{classpath.ICEBERG_ARTIFACT}-$(ICEBERG_VERSION).jar"
    assert makefile_value("JDBC_VERSION") == pom_property("jdbc", "jdbc.version")
    assert classpath.MARIADB_DRIVER.coordinates.endswith(":" + makefile_value("JDBC_VERSION"))
    assert makefile_value("JDBC_JAR") == "$(CACHE)/jdbc/mariadb-java-client-$(JDBC_VERSION).jar"
    assert makefile_value("S3PROXY_VERSION") == pom_property("cluster", "s3proxy.version")
    assert pom_property("cluster", "iceberg.version") == classpath.ICEBERG_VERSION
    assert pom_property("rest", "iceberg.version") == classpath.ICEBERG_VERSION
    assert makefile_value("DECODER_JAR") == f"$(CACHE)/decoder/{classpath.DECODER_JAR}"
    assert makefile_value("NESSIE_VERSION") == pom_property("nessie", "nessie.version") == artifacts.NESSIE_VERSION


def test_the_cached_jdbc_driver_joins_the_sessions_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("CANALBRIDGE_CACHE", str(tmp_path))
    settings = SparkSettings(master="local[1]", warehouse="/w", spill_dir="/s",
                             conf={"spark.jars.packages": classpath.ICEBERG_PACKAGE})
    assert "spark.jars" not in session.session_conf(settings)
    (tmp_path / "jdbc").mkdir()
    (tmp_path / "jdbc" / "mariadb-java-client-3.5.7.jar").write_bytes(b"")
    assert session.session_conf(settings)["spark.jars"] == str(tmp_path / "jdbc" / "mariadb-java-client-3.5.7.jar")
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "iceberg-aws-bundle-1.11.0.jar").write_bytes(b"")
    (tmp_path / "cluster" / "s3proxy-2.7.0-jar-with-dependencies.jar").write_bytes(b"")  # the tests' store only
    assert session.session_conf(settings)["spark.jars"].split(",") == [
        str(tmp_path / "jdbc" / "mariadb-java-client-3.5.7.jar"),
        str(tmp_path / "cluster" / "iceberg-aws-bundle-1.11.0.jar")]


def test_the_canal_pom_leaves_out_canal_prometheus():
    pom = (ROOT / "deploy" / "maven" / "canal" / "pom.xml").read_text()
    assert "<artifactId>canal.prometheus</artifactId>" in pom.split("<exclusions>")[1]


def test_missing_artifacts_name_the_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("CANALBRIDGE_CACHE", str(tmp_path))
    with pytest.raises(artifacts.MissingArtifact, match="make canal-jars"):
        artifacts.canal_home()
    with pytest.raises(artifacts.MissingArtifact, match="make rest-catalog"):
        artifacts.rest_catalog_home()
    with pytest.raises(session.SparkSetupError, match="make iceberg-jar"):
        session.session_conf(SparkSettings(warehouse="/w", spill_dir="/s"))


def test_missing_mariadb_names_the_make_target(monkeypatch):
    monkeypatch.setattr(artifacts, "find_binary", lambda name: None)
    with pytest.raises(artifacts.MissingArtifact, match="make mariadb-server"):
        artifacts.mariadb_binaries()


def test_canal_passwd_is_mysql_password_without_the_star():
    # MySQL's PASSWORD('canal') is *E3619321C1A937C46A0D8BD1DAC39F93B27D4458.
    assert canal_passwd("canal") == "e3619321c1a937c46a0d8bd1dac39f93b27d4458"


def test_the_driver_heap_is_explicit_unless_the_user_sets_it():
    iceberg = {"spark.jars.packages": classpath.ICEBERG_PACKAGE}  # so that no jar need be in the cache
    settings = SparkSettings(master="local[1]", warehouse="/w", spill_dir="/s", conf=iceberg)
    assert session.session_conf(settings)["spark.driver.memory"] == session.DRIVER_MEMORY
    mine = dataclasses.replace(settings, conf={**iceberg, "spark.driver.memory": "6g"})
    assert session.session_conf(mine)["spark.driver.memory"] == "6g"
