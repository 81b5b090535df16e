"""The import contract: layers run one way, the product never reaches into the dev kit, and nothing in the wheel
reaches into the test infrastructure.

Canal client <- sync <- Spark sink <- daemon, each a package named here. The dev kit (dev server,
workload generator, verifier, demo) may use the product;
of the product only the CLI may use the dev kit, for ``demo`` and
``devserver``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CLIENT = ("canalbridge.canal", "canalbridge.protocol", "canalbridge.mysql_types", "canalbridge.source_db")
SYNC = ("canalbridge.sync",)
SINK = ("spark_sink",)
DAEMON = ("canalbridge.daemon",)
DEVKIT = ("canalbridge.devkit",)
PACKAGE = ("canalbridge.__main__",)  # ``python -m canalbridge`` (and ``canalbridge`` itself: the version)
LAYERS = (CLIENT, SYNC, SINK, DAEMON, DEVKIT, PACKAGE)
# What each layer may not import.
FORBIDDEN = {
    CLIENT: (*SYNC, *SINK, *DAEMON, *DEVKIT),
    SYNC: (*SINK, *DAEMON, *DEVKIT),
    # The sink speaks the change vocabulary (canalbridge.sync.model.changes), not Canal's wire format.
    SINK: (*DAEMON, *DEVKIT, "canalbridge.protocol"),
}
CLI_MAY_USE_DEVKIT = "canalbridge.daemon.cli"

# Inside the sync core, each sub-package owns one role (docs/design/layout.md); what each may not import.
S = "canalbridge.sync."
CANAL_SOURCE, KAFKA_SOURCE = f"{S}source.canal", f"{S}source.kafka"
THREADS = (f"{S}source", f"{S}consumer", f"{S}channel", f"{S}routing", f"{S}job")  # the parts that run
SYNC_ROLES = {
    # Values and shapes: no part that runs.
    f"{S}model": THREADS,
    f"{S}schema": THREADS,
    # A source hands batches over and takes acks; it knows nothing of what consumes them.
    f"{S}source": (f"{S}consumer", f"{S}channel", f"{S}routing", f"{S}job", f"{S}snapshot"),
    CANAL_SOURCE: (KAFKA_SOURCE,),
    KAFKA_SOURCE: (CANAL_SOURCE,),
    # The Consumer speaks to any source through the source protocol alone.
    f"{S}consumer": (f"{S}job", CANAL_SOURCE, KAFKA_SOURCE),
    # A channel is fed; it never reaches back to what feeds it.
    f"{S}channel": (f"{S}consumer", f"{S}source", f"{S}routing", f"{S}job"),
    f"{S}routing": (f"{S}consumer", f"{S}source", f"{S}job", f"{S}snapshot"),
    f"{S}snapshot": (f"{S}consumer", f"{S}source", f"{S}channel", f"{S}job"),
}
# The modules directly in canalbridge/sync (errors, settings, options, retry, worker) serve every role: of the
# roles they may use only the values.
SYNC_SHARED = (*THREADS, f"{S}schema", f"{S}snapshot")
GENERIC_SOURCE = (f"{S}source.link", f"{S}source.handoff", f"{S}source.receiver")


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")
TEST_INFRA = "tests"  # test infrastructure (tests/infra): outside the wheel, so nothing in it may be imported


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    paths = [*ROOT.joinpath("canalbridge").rglob("*.py"), *ROOT.joinpath("spark_sink").rglob("*.py")]
    return {module_name(path): path for path in paths if not path.name.endswith("_pb2.py")}


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = product_modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    imported = imports_of(MODULES[module])
    tests = sorted(name for name in imported if name == TEST_INFRA or name.startswith(f"{TEST_INFRA}."))
    assert not tests, f"{module} (in the wheel) imports test infrastructure: {tests}"
    imported = {name for name in imported if name.startswith(("canalbridge", "spark_sink"))}
    for layer, forbidden in FORBIDDEN.items():
        if module.startswith(layer):
            broken = sorted(name for name in imported if name.startswith(forbidden))
            assert not broken, f"{module} imports {broken}, which its layer may not use"
    if not module.startswith(DEVKIT) and module != CLI_MAY_USE_DEVKIT:
        devkit = sorted(name for name in imported if name.startswith(DEVKIT))
        assert not devkit, f"{module} (product) imports the dev kit: {devkit}"


@pytest.mark.parametrize("module", sorted(name for name in MODULES if within(name, "canalbridge.sync")))
def test_sync_packages_keep_to_their_roles(module):
    imported = {name for name in imports_of(MODULES[module]) if within(name, "canalbridge.sync")}
    forbidden: tuple[str, ...] = ()
    for package, not_these in SYNC_ROLES.items():
        if within(module, package):
            forbidden += not_these
    if module.count(".") == 2:  # canalbridge.sync.<module>: shared by every role
        forbidden += SYNC_SHARED
    if any(within(module, generic) for generic in GENERIC_SOURCE):
        forbidden += (CANAL_SOURCE, KAFKA_SOURCE)
    broken = sorted(name for name in imported if any(within(name, package) for package in forbidden))
    assert not broken, f"{module} imports {broken}, which its role may not use"


# Who may name one kind of source: its own package, the link opener, and the loader that builds a job's settings
# from its TOML table. Everything else asks the source protocol (docs/design/layout.md#the-sync-core).
KIND_AWARE = (f"{S}source", "canalbridge.daemon.config")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_source_packages_and_the_loader_tell_the_kinds_of_source_apart(module):
    if any(within(module, allowed) for allowed in KIND_AWARE):
        return
    named = sorted(name for name in imports_of(MODULES[module])
                   if within(name, CANAL_SOURCE) or within(name, KAFKA_SOURCE))
    assert not named, f"{module} imports {named}: it should ask the source protocol instead"


def test_the_contract_sees_the_modules_it_guards():
    # A contract over nothing passes vacuously: make sure each layer is there.
    for prefix in (*CLIENT, *SYNC, *SINK, *DAEMON, *DEVKIT, CLI_MAY_USE_DEVKIT, *SYNC_ROLES, *GENERIC_SOURCE):
        assert any(name.startswith(prefix) for name in MODULES), prefix


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_belongs_to_a_named_layer(module):
    assert module == "canalbridge" or module.startswith(tuple(p for layer in LAYERS for p in layer)), module


def test_the_layout_page_names_every_module():
    # The sync core's page describes packages, each module by its name within one: a package named there
    # covers the modules directly in it that its paragraph names (or, for its __init__, the package itself).
    page = ROOT.joinpath("docs", "design", "layout.md").read_text()
    named_packages = set(re.findall(r"`((?:canalbridge|spark_sink)/[\w/]+/)`", page))

    def named(path: Path) -> bool:
        relative = path.relative_to(ROOT).as_posix()
        package = relative.rsplit("/", 1)[0] + "/"
        if f"`{relative}`" in page:
            return True
        if package not in named_packages:
            return False
        paragraph = next(p for p in page.split("\n\n") if f"`{package}`" in p)
        return path.name == "__init__.py" or f"`{path.name}`" in paragraph

    unnamed = sorted(path.relative_to(ROOT).as_posix() for path in MODULES.values() if not named(path))
    assert not unnamed, f"docs/design/layout.md does not name {unnamed}"


def test_the_layout_page_names_no_module_that_is_gone():
    page = ROOT.joinpath("docs", "design", "layout.md").read_text()
    named = set(re.findall(r"`((?:canalbridge|spark_sink)/[\w/]+(?:\.py|/))`", page))
    gone = sorted(path for path in named if not ROOT.joinpath(path).exists())
    assert not gone, f"docs/design/layout.md names modules or packages that do not exist: {gone}"
