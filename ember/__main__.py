"""``python -m ember run PROGRAM.py [ARGS...]``: run a PyTorch program on ember."""
import argparse
import os
import runpy
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="ember", description="Run PyTorch programs on ember.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run PROGRAM.py with `import torch` served by ember")
    run.add_argument("program", help="a Python file, or -m MODULE")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    sub.add_parser("version", help="print ember's version")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["run", "-m"]:
        # `run -m MODULE ARGS`: argparse would take -m for an option of its own
        ns = argparse.Namespace(command="run", program="-m", args=argv[2:])
    else:
        ns = parser.parse_args(argv)
    if ns.command == "version":
        import ember
        print(ember.__version__)
        return 0
    from ember.compat import alias_torch
    alias_torch()
    if ns.program == "-m":
        if not ns.args:
            parser.error("run -m needs a module name")
        module, rest = ns.args[0], ns.args[1:]
        sys.argv = [module] + rest
        if module == "torch" or module.startswith("torch."):
            # `-m torch.distributed.run` runs the ember module that serves it
            from ember.compat import _RENAMES
            module = _RENAMES.get(module) or "ember" + module[len("torch"):]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    path = ns.program
    if not os.path.exists(path):
        parser.error(f"no such program: {path}")
    sys.argv = [path] + ns.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    # as ``python prog.py`` does: the program's file (its __file__, the file of its
    # frames) is made absolute by joining the working directory, sys.argv[0] is as given
    runpy.run_path(path if os.path.isabs(path) else os.path.join(os.getcwd(), path),
                   run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
