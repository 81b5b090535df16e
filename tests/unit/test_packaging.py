"""What a wheel carries: every package of the product, found the way the build finds them."""

from __future__ import annotations

import configparser
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("canalbridge", "spark_sink")


def packages_the_build_finds() -> set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    include = config["options.packages.find"]["include"].split()
    return set(find_packages(str(ROOT), include=include))


def directories_holding_python() -> set[str]:
    found = set()
    for top in PRODUCT:
        for module in (ROOT / top).rglob("*.py"):
            found.add(".".join(module.parent.relative_to(ROOT).parts))
    return found


def test_every_directory_of_the_product_that_holds_python_is_a_package_the_wheel_carries():
    missing = directories_holding_python() - packages_the_build_finds()
    assert not missing, f"directories with Python files but no __init__.py, left out of the wheel: {sorted(missing)}"


def test_the_build_finds_nothing_outside_the_product():
    assert {name.split(".")[0] for name in packages_the_build_finds()} == set(PRODUCT)
