"""Megatron-LM's own pure-Python code, loaded from a checkout for the conformance test (the project carries none
of it). Debian's torch is older than Megatron-LM asks for and has no CUDA, and Megatron's package __init__s
pull in transformer_engine, apex and more, so:
  - packages are made as empty modules whose __path__ is the checkout's folder: a module imported from them
    is the checkout's file, run as it is, without its package's __init__;
  - the functions of heavy modules (training.py, schedules.py) are taken out of the checkout's source by name
    (`functions`) and run in a namespace the harness fills: with the checkout's other functions where they run
    here, and with a stub where they need a GPU, a newer torch or Megatron's initialisation. Every stub is
    recorded in STUBBED with the reason, and every global name a taken function reads must be provided
    (MissingGlobal names it otherwise: a newer Megatron-LM that uses more is reported, not half-run).
"""
import ast
import builtins
import dis
import importlib
import importlib.abc
import importlib.machinery
import os
import subprocess
import sys
import types

STUBBED = []  # (what, why)


def stub(what, why):
    if (what, why) not in STUBBED:
        STUBBED.append((what, why))


class MissingGlobal(RuntimeError):
    """A function taken from the checkout reads a global name the harness does not provide."""


class Checkout:
    def __init__(self, src):
        self.src = os.path.abspath(src)
        if not os.path.isfile(os.path.join(self.src, "megatron", "core", "num_microbatches_calculator.py")):
            raise SystemExit("megatron-conformance: %s is not a Megatron-LM checkout (no "
                             "megatron/core/num_microbatches_calculator.py)" % src)

        sys.meta_path.insert(0, _EmptyPackages(self))

    def describe(self):
        """The checkout's commit and branch, as git tells (or the folder where it is no git work tree)."""
        try:
            commit = subprocess.run(["git", "-C", self.src, "log", "-1", "--format=%H %cs"], capture_output=True,
                                    text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
        return commit or self.src

    def path(self, rel):
        return os.path.join(self.src, rel)

    def package(self, name):
        """An empty package `name` whose submodules are the checkout's files (its __init__ does not run)."""
        if name in sys.modules:
            return sys.modules[name]
        mod = types.ModuleType(name)
        mod.__path__ = [self.path(name.replace(".", os.sep))]
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(self.package(parent), child, mod)
        return mod

    def module(self, name):
        """The checkout's module `name`, run as it is (its packages made empty)."""
        parts = name.split(".")
        for i in range(1, len(parts)):
            self.package(".".join(parts[:i]))
        return importlib.import_module(name)

    def source_of(self, rel, name):
        """The source text of top-level function or class `name` in the checkout's file `rel`."""
        path = self.path(rel)
        with open(path) as f:
            text = f.read()
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return ast.get_source_segment(text, node)
        raise MissingGlobal("%s has no top-level %s" % (rel, name))

    def functions(self, rel, names, namespace):
        """Takes top-level functions `names` out of the checkout's file `rel` and defines them in `namespace`
        (a dict: their globals), decorators (they only trace) and annotations dropped. Returns namespace. Each global name
        they read must be in namespace (or a builtin) once everything is defined: check_globals()."""
        path = self.path(rel)
        with open(path) as f:
            tree = ast.parse(f.read(), filename=path)
        found = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                node.decorator_list = []
                for fn in ast.walk(node):  # annotations only name types: not evaluated here
                    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        fn.returns = None
                        a = fn.args
                        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                            if arg is not None:
                                arg.annotation = None
                found[node.name] = node
        missing = [n for n in names if n not in found]
        if missing:
            raise MissingGlobal("%s has no top-level %s" % (rel, ", ".join(missing)))
        module = ast.Module(body=[found[n] for n in names], type_ignores=[])
        exec(compile(module, path, "exec"), namespace)
        namespace.setdefault("__taken__", []).extend((rel, n) for n in names)
        return namespace


class _EmptyPackages(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Every package of the checkout's megatron/ imported as an empty module with its folder as __path__: its
    __init__ never runs, whoever imports it (the checkout's own modules included)."""

    def __init__(self, checkout):
        self.checkout = checkout

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] != "megatron":
            return None
        folder = self.checkout.path(fullname.replace(".", os.sep))
        if not os.path.isdir(folder):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = [self.checkout.path(spec.name.replace(".", os.sep))]
        return mod

    def exec_module(self, module):
        pass


def global_names(func):
    """The global names a function (and the functions nested in it) reads."""
    names = set()
    codes = [func.__code__]
    while codes:
        code = codes.pop()
        for ins in dis.get_instructions(code):
            if ins.opname == "LOAD_GLOBAL":
                names.add(ins.argval)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def check_globals(namespace):
    """Every global a taken function reads is provided: else MissingGlobal names them."""
    names = set(dir(builtins))
    missing = []
    for rel, name in namespace.get("__taken__", []):
        for g in sorted(global_names(namespace[name])):
            if g not in namespace and g not in names:
                missing.append("%s:%s reads %s" % (rel, name, g))
    if missing:
        raise MissingGlobal("the harness does not provide what this checkout's functions read: " +
                            "; ".join(missing))


class CpuTorch(types.ModuleType):
    """torch as the taken functions see it: device='cuda' means the CPU (torch.cuda.current_device() answers
    "cpu", empty_cache() does nothing). Everything else is torch itself."""

    def __init__(self, torch):
        super().__init__("torch")
        self._torch = torch
        self.cuda = types.SimpleNamespace(current_device=lambda: "cpu", empty_cache=lambda: None,
                                          is_available=lambda: False, synchronize=lambda *a, **k: None)
        stub("torch.cuda in train_step, the schedule and the reductions",
             "no GPU: tensors asked for on 'cuda' are made on the CPU")

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def _cpu(self, kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return kwargs

    def tensor(self, *a, **k):
        return self._torch.tensor(*a, **self._cpu(k))

    def zeros(self, *a, **k):
        return self._torch.zeros(*a, **self._cpu(k))

    def ones(self, *a, **k):
        return self._torch.ones(*a, **self._cpu(k))

    def empty(self, *a, **k):
        return self._torch.empty(*a, **self._cpu(k))
