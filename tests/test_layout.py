"""The package's layers, checked from the source: imports only go down, no cycles, small
modules, and no development harness in what ships.

Layers, lowest first (docs/ARCHITECTURE.md draws them):

    streamdedup/{errors,settings,extras,garbage,heap,pids,process,terminal}.py
               the foundation every layer may import
    core/      pure functions: text -> shingles -> signature -> band keys -> verdict
    store/     the Store interface and its backends (knows nothing of sketches: it does
               not import core either, although the order would let it)
    detection/ the detector, driving the core's steps against the Store interface
    service/   the Kafka consumer: checkpoint, records, metrics, logs
    replay/    dumps, replays through Kafka, backfill, ground truth and reports
    monitor/   the web monitor and the topic observer behind it and `tail`
    integrations/  the Scrapy pipeline
    cli/       the command line; nothing imports it
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "streamdedup"
LAYERS = ("", "core", "store", "detection", "service", "replay", "monitor", "integrations",
          "cli")
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    if parts[1:2] == ["__main__"]:
        return LAYERS.index("cli")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS[1:] else 0


def imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """Our modules that ``path`` imports (``from a import b`` counts ``a.b`` if it is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES or m.split(".")[0] == "harness"}


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_are_absolute(module: str) -> None:
    """The layer checks below read absolute imports only: a relative one would pass unseen."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    relative = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, f"{module}: relative imports at lines {relative}"


def test_the_scan_sees_every_layer() -> None:
    assert {layer(m) for m in MODULES} == set(range(len(LAYERS)))
    assert layer("streamdedup.settings") == 0 and layer("streamdedup.core.text") == 1
    assert layer("streamdedup.store") == 2 and layer("streamdedup.detection.detector") == 3
    assert layer("streamdedup.monitor.app") == 6 and layer("streamdedup.integrations.scrapy") == 7
    assert layer("streamdedup.cli.main") == 8


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down(module: str) -> None:
    """Function-level imports included: a lazy import is still a dependency."""
    upward = sorted(m for m in imports(MODULES[module])
                    if m.startswith("harness") or layer(m) > layer(module))
    assert not upward, f"{module} (layer {LAYERS[layer(module)] or 'foundation'}) imports {upward}"


def test_no_import_cycles() -> None:
    graph = {m: {i for i in imports(p, top_level_only=True) if i in MODULES and i != m}
             for m, p in MODULES.items()}
    state: dict[str, int] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                raise AssertionError(" -> ".join([*trail[trail.index(n):], n]))
            if n not in state:
                visit(n, [*trail, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it by concept"


def test_the_core_does_no_io_and_the_store_knows_nothing_of_sketches() -> None:
    """The core reaches no store (the layer order says so too); the store does not import
    the core, so a backend is written without knowing how a signature is made."""
    for module, path in MODULES.items():
        if layer(module) in (LAYERS.index("core"), LAYERS.index("store")):
            other = "store" if layer(module) == LAYERS.index("core") else "core"
            found = sorted(i for i in imports(path) if layer(i) == LAYERS.index(other))
            assert not found, f"{module} imports the {other}: {found}"


def test_no_backend_imports_another() -> None:
    """Each store backend stands alone on ``store/``'s shared modules (one backend
    importing from another is what not to copy), so one can be read, or dropped, alone."""
    backends = {"streamdedup.store.memory", "streamdedup.store.sqlite", "streamdedup.store.redis"}

    def backend(module: str) -> str | None:
        return next((b for b in backends if module == b or module.startswith(b + ".")), None)

    for module, path in MODULES.items():
        own = backend(module)
        if own is not None:
            others = sorted(i for i in imports(path) if backend(i) not in (None, own))
            assert not others, f"{module} imports another backend: {others}"


# Test files named for no one module, and what they test instead.
ACROSS_MODULES = {
    "detection/test_detector_retention.py": "the detector with a retention window",
    "monitor/test_monitor.py": "produce, run, tail, explain and the page on a real broker",
    "service/test_fuzz.py": "messages of every shape, from decoding to the verdict",
    "test_compose.py": "docker-compose.yml and the Dockerfile",
    "test_layout.py": "the tree itself",
    "test_security.py": "secrets and bindings across the commands",
}


def test_tests_mirror_the_package() -> None:
    """Every product folder has its test folder (tests/core, tests/store, ...), and each test
    file is named for the module it tests: tests/cli/test_check.py for cli/check.py, and
    tests/harness, tests/scripts for the harness and scripts (the others in
    ``ACROSS_MODULES``). The CLI's were test_cli_check.py, for pytest's default import mode."""
    for sub in LAYERS[1:]:
        assert (ROOT / "tests" / sub).is_dir(), f"tests/{sub}/ is missing"
    tests = ROOT / "tests"
    unnamed = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        name = rel.with_name(rel.name.removeprefix("test_").replace("init.", "__init__."))
        if rel.parts[0] == "harness":
            tested = ROOT / name
        elif rel.parts[0] == "scripts":
            tested = ROOT / "scripts" / name.name
        else:
            tested = ROOT / "streamdedup" / name
        if not tested.exists() and not tested.with_suffix("").is_dir() and str(
                rel) not in ACROSS_MODULES:
            unnamed.append(str(rel))
    assert not unnamed, f"test files named for no module: {unnamed}"
    assert all((tests / rel).exists() for rel in ACROSS_MODULES)


def test_importing_the_consumer_pulls_no_plotting_or_scipy() -> None:
    """The consumer and `check` must start fast and install without the report extra."""
    code = ("import sys, streamdedup.service.consumer, streamdedup.cli.main, "
            "streamdedup.core.text as t; t.Normalizer; "
            "bad = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'matplotlib', 'scipy', 'pandas'}); print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == ""


@pytest.mark.slow
def test_the_wheel_ships_the_product_only(tmp_path: Path) -> None:
    """No harness, tests or scripts in the wheel; every product module is in it. Built from
    a copy without ``build/``: setuptools would ship a module renamed since the last build."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "out", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("streamdedup-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"streamdedup", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}"
                    ".dist-info"}
    shipped = {n for n in names if n.endswith(".py")}
    assert shipped == {str(p.relative_to(ROOT)) for p in MODULES.values()}
    assert not [n for n in names if "chaos" in n or "broker" in n or "generator" in n]
