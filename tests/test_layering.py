"""The layering of ember's modules is a fact, not a convention.

The module-level import graph of ``ember/`` is built from the source with ``ast``:
only imports that run when a module is imported count (the module's top level,
including inside top-level ``try``/``if``/``with`` blocks), not imports inside
functions or class bodies' methods. The graph must have no cycle, and no module
below the package root may import the root ``ember`` at module level. Every primitive
is declared under ``ember/ops/``, and ``ember._core`` (the namespace that modules
inside ember import instead of the root) holds the root's very objects.

``python tests/test_layering.py [-v]`` prints the cycles and the root importers.
"""
import ast
import functools
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "ember"

# the root package itself and ``python -m ember`` may import the root; so may the
# example programs (``python -m ember.examples.mnist``), which use ember the way a
# user's script does and which no module of ember imports
ROOT_IMPORTERS_ALLOWED = {"ember", "ember.__main__"}
ROOT_IMPORTER_PACKAGES_ALLOWED = ("ember.examples.",)


def _may_import_root(name):
    return name in ROOT_IMPORTERS_ALLOWED or name.startswith(ROOT_IMPORTER_PACKAGES_ALLOWED)


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    """Every module under ember/: dotted name -> (path, is_package)."""
    mods = {}
    for path in sorted(PKG.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        mods[_module_name(path)] = (path, path.name == "__init__.py")
    return mods


def _toplevel_imports(tree):
    """Import statements executed at import time: the module body, descending into
    compound statements (if/try/with/for/while) but not into functions or classes."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, None) or [])
            if isinstance(node, ast.ExceptHandler):
                stack.extend(node.body)
            if hasattr(ast, "Match") and isinstance(node, ast.Match):
                for case in node.cases:
                    stack.extend(case.body)


def _resolve_relative(name, is_package, node):
    base = name.split(".") if is_package else name.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _parsed(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def import_graph():
    """Module -> set of ember modules it imports at import time."""
    mods = _modules()
    graph = {}
    for name, (path, is_package) in mods.items():
        tree = _parsed(path)
        edges = set()
        for node in _toplevel_imports(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    if target != "ember" and not target.startswith("ember."):
                        continue
                    # `import ember.a.b` binds the root name `ember` but what runs is the
                    # import of ember.a.b (with its parents); the edge goes to the deepest
                    # module named. `import ember` alone is an edge to the root.
                    while target not in mods and "." in target:
                        target = target.rsplit(".", 1)[0]
                    edges.add(target)
                continue
            module = (
                _resolve_relative(name, is_package, node) if node.level else node.module
            )
            if module is None or (module != "ember" and not module.startswith("ember.")):
                continue
            for alias in node.names:
                sub = module + "." + alias.name
                if alias.name != "*" and sub in mods:
                    edges.add(sub)
                else:
                    target = module
                    while target not in mods and "." in target:
                        target = target.rsplit(".", 1)[0]
                    edges.add(target)
        graph[name] = edges
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the strongly connected components."""
    index = {}
    low = {}
    on_stack = set()
    stack = []
    comps = []
    counter = [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def import_cycles(graph=None):
    """The import cycles: components of more than one module, and self-imports."""
    graph = import_graph() if graph is None else graph
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    cycles += [[m] for m, edges in graph.items() if m in edges]
    return sorted(cycles, key=len, reverse=True)


def _describe(graph, comp):
    inside = set(comp)
    lines = [f"cycle of {len(comp)} modules:"]
    for m in comp:
        lines.append(f"  {m} -> {', '.join(sorted(graph[m] & inside))}")
    return "\n".join(lines)


def test_no_import_cycles():
    graph = import_graph()
    cycles = import_cycles(graph)
    assert not cycles, "module-level import cycles in ember/:\n" + "\n".join(
        _describe(graph, c) for c in cycles
    )


def test_no_submodule_imports_the_package_root():
    graph = import_graph()
    offenders = sorted(
        m for m, edges in graph.items()
        if "ember" in edges and not _may_import_root(m)
    )
    assert not offenders, (
        "these modules import the package root `ember` at module level; import the "
        "submodule that defines the name, or import inside the function that needs it:\n  "
        + "\n  ".join(offenders)
    )


def test_core_namespace_is_the_roots():
    # ember._core stands in for the root inside ember: every name it holds must be the
    # very object `import ember` gives, or a module would call a different function
    import ember
    from ember import _core
    names = [n for n in vars(_core) if not n.startswith("_")]
    assert len(names) > 500
    differ = [n for n in names if getattr(ember, n, None) is not getattr(_core, n)]
    assert not differ, differ


def _primitive_names():
    import ember  # noqa: F401  (loads every op family)
    import ember.nn  # noqa: F401
    from ember.autograd.node import Primitive
    # a primitive's class statement names it _op_name; __name__ is PyTorch's node name
    names, seen, stack = {"Primitive"}, set(), [Primitive]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                names.update((sub.__name__, getattr(sub, "_op_name", sub.__name__)))
                stack.append(sub)
    return names


def _is_primitive_class(module, cls_name):
    """Whether the module-level class ``cls_name`` of ``module`` is a primitive (a class
    whose base only shares a primitive's name, e.g. the nn.ReLU6 module, is not)."""
    import importlib

    from ember.autograd.node import Primitive
    obj = getattr(importlib.import_module(module), cls_name, None)
    return not isinstance(obj, type) or issubclass(obj, Primitive)


def test_every_primitive_is_declared_under_ops():
    # an op's forward and derivative live in ember/ops/; a class statement elsewhere whose
    # base is Primitive (or a primitive) breaks that. Subclasses made at run time with
    # type() (renamed nodes) are not class statements and are not counted.
    primitives = _primitive_names()
    assert {"Primitive", "Mul", "ViewPrimitive"} <= primitives
    outside = []
    for name, (path, _) in _modules().items():
        if name.startswith("ember.ops.") or name in ("ember.ops", "ember.autograd.node"):
            continue
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)
                         for b in node.bases}
                if bases & primitives and _is_primitive_class(name, node.name):
                    outside.append(f"{name}.{node.name}")
    assert not outside, "primitives declared outside ember/ops/: " + ", ".join(outside)


def test_the_graph_is_real():
    # the checker must see the edges it is meant to see: a known import of the tensor
    # module, and a planted cycle is found
    graph = import_graph()
    assert "ember._tensor" in graph["ember"]
    assert len(graph) > 100
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert import_cycles(planted) == [["a", "b", "c"], ["d"]]


def test_toplevel_only():
    tree = ast.parse(
        "import ember.x\n"
        "try:\n    from ember import y\nexcept ImportError:\n    pass\n"
        "if True:\n    import ember.z\n"
        "def f():\n    import ember.w\n"
        "class C:\n    def m(self):\n        import ember.v\n"
    )
    names = sorted(
        a.name if isinstance(n, ast.Import) else n.module + "." + a.name
        for n in _toplevel_imports(tree) for a in n.names
    )
    assert names == ["ember.x", "ember.y", "ember.z"]


if __name__ == "__main__":
    g = import_graph()
    cyc = import_cycles(g)
    print("largest cycle:", len(cyc[0]) if cyc else 0)
    for c in cyc:
        print(_describe(g, c) if "-v" in sys.argv else f"{len(c)}: {c[:6]}...")
    print("root importers:", sorted(m for m, e in g.items() if "ember" in e
                                    and not _may_import_root(m)))
