"""helpers has no import-time side effects (no rcParams change, no CUDA init, no seeds), no import circle, no module over 400 lines."""
import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PROBE = """
import matplotlib, torch
before = dict(matplotlib.rcParams); seed = torch.initial_seed()
import pkgutil, importlib, helpers
for mod in pkgutil.iter_modules(helpers.__path__):
    importlib.import_module("helpers." + mod.name)
assert dict(matplotlib.rcParams) == before, "rcParams changed on import"
assert not torch.cuda.is_initialized(), "CUDA initialised on import"
assert torch.initial_seed() == seed, "seed changed on import"
from helpers.plotting import use_course_style, FIGSIZE
use_course_style()
assert tuple(matplotlib.rcParams["figure.figsize"]) == FIGSIZE
print("ok")
"""


def test_import_has_no_side_effects():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def import_graph(root: Path, package: str = "helpers") -> dict[str, set[str]]:
    """Each module of `package` under `root` and the modules of `package` its import statements name, read with ast.

    Every import statement counts, inside functions too (a lazy import hides a circle, it does not break it).
    `from p import name` names the module p.name where there is one, else p. The parent packages Python imports
    first are not edges: a package's `__init__` importing its parts is no circle unless a part imports the `__init__`.
    """
    files = {path: ".".join(path.relative_to(root).with_suffix("").parts) for path in (root / package).rglob("*.py")}
    modules = {name.removesuffix(".__init__"): path for path, name in files.items()}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: `from . import x` in a package's part starts from that package
                    package = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join([*package, *([node.module] if node.module else [])])
                named = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            graph[module] |= {name for name in named if name in modules and name != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of modules (Tarjan), as 'a -> b -> a' paths, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(path_through(graph, group) for group in groups)


def path_through(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A circle inside `group`: from its first module along edges within the group back to a module already on the path."""
    path = [group[0]]
    while path.count(path[-1]) < 2:
        path.append(min(other for other in graph[path[-1]] if other in group))
    return path[path.index(path[-1]):]


def test_helpers_imports_have_no_circle():
    found = circles(import_graph(ROOT))
    assert not found, "import circles in helpers (a part imports a sibling, never its package's __init__): " + "; ".join(
        " -> ".join(circle) for circle in found)


def test_import_graph_finds_planted_circles(tmp_path):
    plant = {
        "helpers/__init__.py": "",
        "helpers/fine.py": "import helpers.pkg\nfrom helpers.pkg.part import thing\n",
        "helpers/a.py": "from helpers.b import x\n",
        "helpers/b.py": "def f():\n    from helpers import a  # a lazy import still closes the circle\n",
        "helpers/pkg/__init__.py": "from helpers.pkg.part import thing\n",
        "helpers/pkg/part.py": "from .shared import y\nthing = 1\n",
        "helpers/pkg/shared.py": "from .. import pkg\n",  # a part importing its package's __init__
    }
    for name, text in plant.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert graph["helpers.fine"] == {"helpers.pkg", "helpers.pkg.part"} and graph["helpers.b"] == {"helpers.a"}
    assert circles(graph) == [["helpers.a", "helpers.b", "helpers.a"],
                              ["helpers.pkg", "helpers.pkg.part", "helpers.pkg.shared", "helpers.pkg"]]


def test_no_helpers_module_is_over_400_lines():
    long = {str(path.relative_to(ROOT)): n for path in (ROOT / "helpers").rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, f"split these modules (CONTRIBUTING.md: small, clear code): {long}"


def imported_top_levels(path: Path) -> set[str]:
    """The top-level names a Python file imports (absolute imports only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_tools_the_corpus_and_helpers_never_import_tests():
    """Tests import what they test (tools, helpers, the doctor's corpus); nothing imports the tests back."""
    files = [p for part in ("tools", "doctor_corpus", "helpers", "scripts") for p in (ROOT / part).rglob("*.py")]
    assert len(files) > 50
    wrong = {str(p.relative_to(ROOT)) for p in files if imported_top_levels(p) & {"tests", "conftest"}}
    assert not wrong, f"these import the test suite: {sorted(wrong)}"


def test_imported_top_levels_sees_both_import_forms(tmp_path):
    planted = tmp_path / "x.py"
    planted.write_text("import os.path\nfrom tests import doctor_corpus\nfrom . import sibling\n", encoding="utf-8")
    assert imported_top_levels(planted) == {"os", "tests"}
