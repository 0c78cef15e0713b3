"""tools/ stays a package a reader can follow: no module imports itself back through others (an
import circle), and no module is longer than MAX_LINES. The import graph is read with ast, not by
importing, so a lazy import inside a function counts as much as one at the top.

  /usr/bin/python3 tests/test_tools_layout.py [-k SUBSTRING]
"""
import ast
import os
import sys
import tempfile

from pycase import ROOT
import pycase

MAX_LINES = 600
TMP = tempfile.mkdtemp(prefix="attn-test-tools-layout-")
case = pycase.Cases()


def modules(root):
    """{module name: path} of every .py file under root, named as `import` names it with root on
    sys.path (tools/attn/sources/hf.py is attn.sources.hf, an __init__.py its package)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                parts = os.path.relpath(os.path.join(d, f), root)[:-3].split(os.sep)
                out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = os.path.join(d, f)
    return out


def imports(name, path, known):
    """The modules of known that the module name (at path) imports, anywhere in its code."""
    is_package = os.path.basename(path) == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package the module is in
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            for a in node.names:  # `from attn import modelfile` imports attn.modelfile
                found.add(base + "." + a.name if base + "." + a.name in known else base)
    return {m for m in found if m in known and m != name}


def cycles(root):
    """Every import circle among root's modules (each as the list of modules around it)."""
    known = modules(root)
    graph = {m: sorted(imports(m, p, known)) for m, p in known.items()}
    state, stack, found = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in graph[m]:
            if state.get(n) == "open":
                found.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"
    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def too_long(root):
    """(lines, path relative to root) of every module longer than MAX_LINES."""
    out = []
    for m, p in sorted(modules(root).items()):
        n = len(open(p, encoding="utf-8").read().splitlines())
        if n > MAX_LINES:
            out.append((n, os.path.relpath(p, root)))
    return out


@case
def checks_find_a_circle_and_a_long_module():
    """The checks must be able to fail: a package with a lazy circle and a module one line too long."""
    root = os.path.join(TMP, "fake")
    os.makedirs(os.path.join(root, "pkg", "sub"))
    files = {"pkg/__init__.py": "", "pkg/sub/__init__.py": "",
             "pkg/low.py": "def f():\n    from pkg.sub import high\n    return high\n",
             "pkg/sub/high.py": "from pkg import low\n", "tool.py": "import pkg.low\n",
             "pkg/sub/rel.py": "from . import high\nfrom ..low import f\n",
             "long.py": "x = 1\n" * (MAX_LINES + 1)}
    for rel, text in files.items():
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
    found = cycles(root)
    assert found == [["pkg.low", "pkg.sub.high", "pkg.low"]], found
    assert too_long(root) == [(MAX_LINES + 1, "long.py")], too_long(root)
    known = modules(root)
    assert imports("pkg.sub.rel", known["pkg.sub.rel"], known) == {"pkg.sub.high", "pkg.low"}


@case
def tools_have_no_import_circle():
    found = cycles(os.path.join(ROOT, "tools"))
    assert not found, "import circles: %s" % "; ".join(" -> ".join(c) for c in found)


@case
def no_tools_module_over_the_limit():
    found = too_long(os.path.join(ROOT, "tools"))
    assert not found, "over %d lines: %s" % (MAX_LINES, ", ".join("tools/%s (%d)" % (p, n) for n, p in found))


if __name__ == "__main__":
    sys.exit(case.main(TMP))
