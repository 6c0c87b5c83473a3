"""Count what ember provides: primitives (ops with their own derivative), public
functions, Tensor methods, nn modules.

    python tools/inventory.py
"""
import inspect

import ember
import ember.nn
from ember.autograd.node import Primitive


def _subclasses(cls):
    seen, stack = set(), [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return seen


def main():
    prims = {c for c in _subclasses(Primitive) if "forward" in c.__dict__}
    funcs = [n for n in dir(ember) if not n.startswith("_") and callable(getattr(ember, n))
             and not inspect.isclass(getattr(ember, n))]
    methods = [n for n in dir(ember.Tensor) if not n.startswith("_")]
    modules = [n for n in dir(ember.nn) if inspect.isclass(getattr(ember.nn, n))
               and issubclass(getattr(ember.nn, n), ember.nn.Module)]
    fn = [n for n in dir(ember.nn.functional) if not n.startswith("_")
          and callable(getattr(ember.nn.functional, n))]
    print(f"primitives (forward + derivative): {len(prims)}")
    print(f"functions in ember: {len(funcs)}")
    print(f"Tensor methods and properties: {len(methods)}")
    print(f"nn modules: {len(modules)}")
    print(f"nn.functional functions: {len(fn)}")


if __name__ == "__main__":
    main()
