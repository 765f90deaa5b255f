"""The import contract: no module imports a higher layer or an independent sibling, and
cabling/ never imports provisioner. The layers are written once, in pyproject.toml
([tool.provisioner.layers]); every import statement counts, also those inside functions and
under TYPE_CHECKING, since each is a dependency a reader has to follow.

The checker reads the source (ast), so it sees imports that a run would never execute, and the
tests below prove it fails on an upward import injected into a copy of the tree.
"""

from __future__ import annotations

import ast
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Contract:
    """The layers (highest first; each a set of independent packages) and standalone packages."""

    root: str
    layers: tuple[frozenset[str], ...]
    standalone: tuple[str, ...]

    @classmethod
    def load(cls, pyproject: Path) -> Contract:
        """Read [tool.provisioner.layers] of a pyproject.toml."""
        table = tomllib.loads(pyproject.read_text())["tool"]["provisioner"]["layers"]
        layers = tuple(frozenset(p.strip() for p in line.split("|")) for line in table["layers"])
        return cls(table["root"], layers, tuple(table.get("standalone", ())))

    def place(self, module: str) -> tuple[int, str] | None:
        """(layer index, package) of a module of the root package; None if no layer holds it."""
        best: tuple[int, str] | None = None
        for index, packages in enumerate(self.layers):
            for pkg in packages:
                if (module == pkg or module.startswith(pkg + ".")) and (
                    best is None or len(pkg) > len(best[1])
                ):
                    best = (index, pkg)
        return best


def module_name(root: Path, path: Path) -> str:
    """Dotted module name of a source file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement of a file, relative ones resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            # `from pkg import sub` may name a submodule: check it as imported too
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def violations(repo: Path) -> list[str]:
    """Every breach of the contract in the tree at ``repo``, as 'file:line: what' lines."""
    contract = Contract.load(repo / "pyproject.toml")
    root = contract.root
    found: list[str] = []
    for path in sorted((repo / root).rglob("*.py")):
        module = module_name(repo, path)
        here = contract.place(module)
        where = path.relative_to(repo)
        if module == root:
            continue
        if here is None:
            found.append(f"{where}: {module} is in no layer of [tool.provisioner.layers]")
            continue
        seen: set[tuple[int, str]] = set()
        for line, target in imports(path, module):
            if target == root or not target.startswith(root + "."):
                continue
            there = contract.place(target)
            if there is None or there[1] == here[1] or (line, there[1]) in seen:
                continue  # unknown names (`from pkg import function`), its own package
            seen.add((line, there[1]))
            if there[0] < here[0]:
                found.append(f"{where}:{line}: {here[1]} imports {target}, a higher layer "
                             f"({there[1]})")
            elif there[0] == here[0]:
                found.append(f"{where}:{line}: {here[1]} imports {target} of {there[1]}, "
                             f"an independent package of the same layer")
    for pkg in contract.standalone:
        for path in sorted((repo / pkg.replace(".", "/")).rglob("*.py")):
            lines: set[int] = set()
            for line, target in imports(path, module_name(repo, path)):
                if (target == root or target.startswith(root + ".")) and line not in lines:
                    lines.add(line)
                    found.append(f"{path.relative_to(repo)}:{line}: {pkg} imports {target} "
                                 f"({pkg} stands alone)")
    return found


def test_the_tree_keeps_the_contract() -> None:
    assert violations(REPO) == []


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the sources and the contract, to break on purpose."""
    for name in ("provisioner", "cabling"):
        shutil.copytree(REPO / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _inject(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n\ndef _injected() -> None:\n    {line}\n")


def test_an_upward_import_is_caught(tree: Path) -> None:
    # the protocol layer reaching for the site (what bmc/discovery.py once did), and worse
    _inject(tree / "provisioner/bmc/base.py", "from provisioner.inventory import Site")
    _inject(tree / "provisioner/inventory/model.py", "import provisioner.workflow.rack")
    found = violations(tree)
    assert len(found) == 2, found
    assert found[0].startswith("provisioner/bmc/base.py:")
    assert "bmc imports provisioner.inventory, a higher layer" in found[0]
    assert "inventory imports provisioner.workflow.rack, a higher layer" in found[1]


def test_a_relative_upward_import_is_caught(tree: Path) -> None:
    _inject(tree / "provisioner/state/store.py", "from ..health import service")
    found = violations(tree)
    assert found and "provisioner.health" in found[0], found


def test_an_import_between_independent_packages_is_caught(tree: Path) -> None:
    _inject(tree / "provisioner/deploy/base.py", "from provisioner.health import model")
    found = violations(tree)
    assert found and "independent package of the same layer" in found[0], found


def test_cabling_importing_provisioner_is_caught(tree: Path) -> None:
    _inject(tree / "cabling/model.py", "from provisioner.exceptions import InputError")
    found = violations(tree)
    assert found == [found[0]] and found[0].startswith("cabling/model.py:"), found


def test_a_package_in_no_layer_is_caught(tree: Path) -> None:
    (tree / "provisioner/newarea").mkdir()
    (tree / "provisioner/newarea/__init__.py").write_text('"""A new area."""\n')
    assert violations(tree) == [
        "provisioner/newarea/__init__.py: provisioner.newarea is in no layer of "
        "[tool.provisioner.layers]"
    ]
