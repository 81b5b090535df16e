"""The build's one step setup.cfg cannot say: the decoder jar goes into every wheel and sdist.

The JVM RowChange decoder (``spark_sink/decoder``) is Java, built by ``make
decoder-jar`` into the git-ignored cache. A wheel without it would run the
slow Python decoder and position deletes without saying so, so a wheel (or an
sdist) cannot be built without it: ``make dist`` builds the jar first. An
editable install (``make venv``) needs no copy: a checkout finds the jar in
its cache.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PACKAGED = Path("spark_sink") / "jars" / "canalbridge-decoder.jar"  # where spark_sink.classpath looks for it


def decoder_jar() -> Path:
    """The jar to package: the one an sdist carries, else the one ``make decoder-jar`` built."""
    for candidate in (HERE / PACKAGED,
                      Path(os.environ.get("CANALBRIDGE_CACHE") or HERE / ".cache") / "decoder" / PACKAGED.name):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"error: the wheel needs the decoder jar ({PACKAGED.name}), which is not built: "
                     "build the wheel with `make dist`, which builds the jar first")


class BuildWithDecoder(build_py):
    """build_py that puts the decoder jar into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / PACKAGED
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(decoder_jar(), target)


class SdistWithDecoder(sdist):
    """sdist that carries the decoder jar, so that a wheel built from it carries it too."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / PACKAGED
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(decoder_jar(), target)


setup(cmdclass={"build_py": BuildWithDecoder, "sdist": SdistWithDecoder})
