"""``for`` loops in scripted code.

Loops over ``range``, lists, tensors, dict keys, and ``enumerate``/``zip`` of those become
TorchScript ``for _i in range(n):`` loops (PyTorch's printed form, with
``torch.__range_length``/``torch.__derive_index`` for ``range(a, b, s)``). Loops over a
``ModuleList``/``Sequential``/``ModuleDict`` or over a tuple are unrolled, as TorchScript
does, because each item may have a different type.
"""
import ast
import builtins
import re

from ember.jit import _types as T
from ember.jit._frontend_expr import Val, static

_HEADERS = ("range", "enumerate", "zip", "reversed")


def _header_call(fc, it):
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
            it.func.id in _HEADERS and it.func.id not in fc.scope.vars:
        try:
            obj = fc.lookup(it.func, it.func.id)
        except Exception:
            return None
        if obj is getattr(builtins, it.func.id):
            return it.func.id
    return None


def _targets(fc, target, n):
    """The Name nodes a loop target unpacks into (``n`` of them)."""
    if n == 1:
        return [target]
    if not isinstance(target, (ast.Tuple, ast.List)) or len(target.elts) != n:
        fc.error(target, f"the loop target must unpack {n} values")
    return list(target.elts)


def _name(fc, t):
    if not isinstance(t, ast.Name):
        fc.unsupported(t, "loop targets other than names")
    return t.id


def compile_for(fc, node, body_fn=None):
    head = _header_call(fc, node.iter)
    if head == "range":
        return _range_loop(fc, node, body_fn)
    if head in ("enumerate", "zip"):
        if node.iter.keywords:
            fc.unsupported(node.iter, f"keyword arguments to {head}()")
        srcs = [_source(fc, a) for a in node.iter.args]
        if head == "enumerate":
            if len(srcs) != 1:
                fc.unsupported(node.iter, "enumerate() with a start argument")
            srcs = [("count", None)] + srcs
        if any(kind == "unroll" for kind, _ in srcs):
            return _unrolled(fc, node, srcs, body_fn)
        return _indexed(fc, node, srcs, body_fn, tuple_target=True)
    if head == "reversed":
        fc.unsupported(node.iter, "reversed() in a for loop header")
    src = _source(fc, node.iter)
    if src[0] == "unroll":
        return _unrolled(fc, node, [src], body_fn)
    return _indexed(fc, node, [src], body_fn, tuple_target=False)


def _source(fc, it):
    """('unroll', [Val...]) for module containers and tuples, ('list', Val) for lists,
    ('tensor', Val), ('dict', Val) for the rest."""
    v = fc.expr(it)
    if v.is_static:
        owner = fc.owner
        if owner is not None and (owner.is_module(v.obj) or hasattr(v.obj, "mod")):
            return "unroll", owner.module_items(fc, it, v)
        obj = v.obj
        if isinstance(obj, (list, tuple)):
            return "unroll", [fc.to_runtime(it, static(x)) for x in obj]
        fc.error(it, f"cannot iterate over a python {type(obj).__name__} in scripted code")
    if v.ty.kind == "Tuple":
        return "unroll", [Val(f"({v.code})[{i}]", t) for i, t in enumerate(v.ty.args)]
    if v.ty.kind == "List":
        return "list", v
    if v.ty.is_tensor:
        return "tensor", v
    if v.ty.kind == "Dict":
        return "list", Val(f"torch.keys({v.code})", T.list_of(v.ty.args[0]))
    if v.ty.kind == "str":
        return "list", Val(f"torch.list({v.code})", T.list_of(T.STR))
    fc.error(it, f"'{v.ty}' object is not iterable")


def _run_body(fc, node, body_fn):
    if body_fn is not None:
        body_fn()
    else:
        fc.block(node.body)


_ITEM = re.compile(r'^getattr\((.+), ("[^"]*")\)$')


def _hoisted(fc, items):
    """The modules of a container, read once before the unrolled loop as PyTorch does
    (``_0 = getattr(blocks, "0")`` for each, after ``blocks = self.blocks``)."""
    found = [_ITEM.match(v.code or "") if isinstance(v, Val) and v.is_static else None
             for v in items]
    if not items or not all(found) or len({m.group(1) for m in found}) != 1:
        return items
    container = fc.emit_tmp(found[0].group(1))
    return [static(v.obj, fc.emit_tmp(f"getattr({container}, {m.group(2)})"))
            for v, m in zip(items, found)]


def _unrolled(fc, node, srcs, body_fn):
    for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(sub, (ast.Break, ast.Continue)):
            fc.unsupported(sub, "break/continue in loops over modules or tuples (which "
                           "are unrolled)")
    lengths = [len(items) for kind, items in srcs if kind == "unroll"]
    n = min(lengths)
    for kind, _ in srcs:
        if kind not in ("unroll", "count"):
            fc.unsupported(node.iter, "zip() of a module container with a runtime list")
    targets = _targets(fc, node.target, len(srcs))
    srcs = [(kind, _hoisted(fc, items) if kind == "unroll" else items)
            for kind, items in srcs]
    for i in range(n):
        for (kind, items), t in zip(srcs, targets):
            val = Val(str(i), T.INT) if kind == "count" else items[i]
            if isinstance(val, tuple):
                # a (key, module) pair of ModuleDict.items(): bound name by name
                names = _targets(fc, t, len(val))
                for nm, part in zip(names, val):
                    fc.scope.vars[_name(fc, nm)] = (None, part) if part.is_static else (
                        None, static(_literal_value(part)))
                continue
            if isinstance(t, ast.Name):
                if val.is_static:
                    fc.scope.vars[t.id] = (None, val)
                else:
                    fc.bind(t, t.id, val)
            else:
                fc.assign(t, val)
        _run_body(fc, node, body_fn)
        if fc.terminated:
            return


def _literal_value(v):
    return ast.literal_eval(v.code)


def _range_loop(fc, node, body_fn):
    args = node.iter.args
    if node.iter.keywords or not 1 <= len(args) <= 3:
        fc.error(node.iter, "range() takes 1 to 3 positional arguments")
    vals = [fc.rvalue(a) for a in args]
    for a, v in zip(args, vals):
        if v.ty != T.INT:
            fc.error(a, f"range() arguments must be int, not {v.ty}")
    target = _name(fc, node.target)
    if len(vals) == 1:
        var = target
        prologue = []
        header = f"for {var} in range({vals[0].code}):"
    else:
        lo, hi = vals[0].code, vals[1].code
        step = vals[2].code if len(vals) == 3 else "1"
        var = fc.fresh()
        header = f"for {var} in range(torch.__range_length({lo}, {hi}, {step})):"
        prologue = [f"{target} = torch.__derive_index({var}, {lo}, {step})"]
    fc.emit(header)
    fc.loop_body(node.body, prologue=prologue, binds={target: (target, T.INT)},
                 body_fn=body_fn)


def _indexed(fc, node, srcs, body_fn, tuple_target):
    hoisted = []
    for kind, v in srcs:
        if kind != "count" and not v.code.isidentifier():
            # evaluated once, before the loop, as Python does
            v = Val(fc.emit_tmp(v.code), v.ty)
        hoisted.append((kind, v))
    srcs = hoisted
    lens = []
    for kind, v in srcs:
        if kind == "count":
            continue
        lens.append(f"torch.len({v.code})")
    k = fc.fresh()
    count = lens[0] if len(lens) == 1 else f"ops.prim.min([{', '.join(lens)}])"
    targets = _targets(fc, node.target, len(srcs)) if tuple_target else [node.target]
    prologue, binds = [], {}
    for (kind, v), t in zip(srcs, targets):
        if kind == "count":
            code, ty = k, T.INT
        elif kind == "tensor":
            code, ty = f"torch.select({v.code}, 0, {k})", T.TENSOR
        else:
            code, ty = f"{v.code}[{k}]", v.ty.elem
        if isinstance(t, ast.Name):
            prologue.append(f"{t.id} = {code}")
            binds[t.id] = (t.id, ty)
        elif isinstance(t, (ast.Tuple, ast.List)) and ty.kind == "Tuple":
            names = [_name(fc, e) for e in t.elts]
            if len(names) != len(ty.args):
                fc.error(t, f"cannot unpack {len(ty.args)} values into {len(names)}")
            prologue.append(", ".join(names) + f" = {code}")
            for nm, et in zip(names, ty.args):
                binds[nm] = (nm, et)
        else:
            fc.unsupported(t, "this loop target")
    fc.emit(f"for {k} in range({count}):")
    fc.loop_body(node.body, prologue=prologue, binds=binds, body_fn=body_fn)
