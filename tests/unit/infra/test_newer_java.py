"""Nessie's server needs a Java 21 or newer: which JDK the tests start it with, and the error when there is none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra import artifacts


def jdk(root: Path, name: str, version: str) -> Path:
    """A JDK's layout as the finder reads it: ``release`` and an executable ``bin/java``."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "bin" / "java").chmod(0o755)
    (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def jvm_dirs(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(artifacts, "JVM_DIRS", tmp_path)
    monkeypatch.delenv("CANALBRIDGE_JAVA_HOME", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return tmp_path


def test_the_newest_installed_jdk_that_is_new_enough_is_taken(jvm_dirs):
    jdk(jvm_dirs, "java-17-openjdk", "17.0.15")
    jdk(jvm_dirs, "temurin-21", "21.0.4")
    newest = jdk(jvm_dirs, "temurin-25", "25.0.3")
    assert artifacts.newer_java_binary(21) == str(newest / "bin" / "java")


def test_java_home_comes_first_when_it_is_new_enough(jvm_dirs, tmp_path_factory, monkeypatch):
    jdk(jvm_dirs, "temurin-25", "25.0.3")
    mine = jdk(tmp_path_factory.mktemp("opt"), "jdk-21", "21.0.4")
    monkeypatch.setenv("JAVA_HOME", str(mine))
    assert artifacts.newer_java_binary(21) == str(mine / "bin" / "java")
    monkeypatch.setenv("JAVA_HOME", str(jdk(tmp_path_factory.mktemp("old"), "jdk-17", "17.0.15")))
    assert artifacts.newer_java_binary(21) == str(jvm_dirs / "temurin-25" / "bin" / "java")


def test_an_override_too_old_is_refused_naming_it(jvm_dirs, monkeypatch):
    jdk(jvm_dirs, "temurin-25", "25.0.3")
    old = jdk(jvm_dirs, "java-17-openjdk", "17.0.15")
    monkeypatch.setenv("CANALBRIDGE_JAVA_HOME", str(old))
    with pytest.raises(artifacts.MissingArtifact, match=rf"no Java 21 or newer in CANALBRIDGE_JAVA_HOME \({old}\)"):
        artifacts.newer_java_binary(21)


def test_no_jdk_new_enough_says_what_to_install(jvm_dirs):
    jdk(jvm_dirs, "java-17-openjdk", "17.0.15")
    (jvm_dirs / "broken").mkdir()  # a directory without a release file counts as no JDK
    with pytest.raises(artifacts.MissingArtifact, match=r"install a JDK 21\+, or set CANALBRIDGE_JAVA_HOME"):
        artifacts.newer_java_binary(21)
