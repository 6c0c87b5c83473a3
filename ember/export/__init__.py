"""``ember.export``: the strict, sound form of compile's capture (``torch.export``'s
shape). ``export(model, args, dynamic_shapes=...)`` captures the forward once into
the IR; anything the capture cannot record is an error naming the reason and the
user's line; sizes marked with :class:`Dim` are checked to be symbolic (a second
capture at another size must give the same graph) and every call of
``ExportedProgram.module()`` is checked against the recorded constraints."""
import collections

import numpy as np

from ember import _tensor
from ember._compile._capture import Unsupported, capture_graph, signature

Tensor = _tensor.Tensor

__all__ = ["export", "ExportedProgram", "Dim", "ExportGraphSignature", "ValueRange",
           "ConstraintViolationError"]

_INF = float("inf")


class ConstraintViolationError(RuntimeError):
    """A size marked dynamic is not (the graph depends on its value), or a range given
    for it is empty."""


ValueRange = collections.namedtuple("ValueRange", ["lower", "upper"])


class Dim:
    """A symbolic size: ``Dim("batch", min=1, max=64)`` (bounds inclusive)."""

    def __init__(self, name, *, min=None, max=None):
        self.__name__ = name
        self.min = 0 if min is None else int(min)
        self.max = _INF if max is None else int(max)
        if self.max < self.min:
            raise ConstraintViolationError(f"Dim {name}: max {max} is below min {min}")

    def __repr__(self):
        return f"Dim({self.__name__!r}, min={self.min}, max={self.max})"


ExportGraphSignature = collections.namedtuple(
    "ExportGraphSignature", ["user_inputs", "parameters", "buffers", "user_outputs"])


def _arg_dims(dynamic_shapes, names, n):
    """The per-argument ``{dim: Dim}`` maps from ``dynamic_shapes`` (a dict by the
    forward's parameter names, or a tuple/list by position)."""
    if dynamic_shapes is None:
        return [{} for _ in range(n)]
    if isinstance(dynamic_shapes, dict):
        extra = set(dynamic_shapes) - set(names)
        if extra:
            raise ValueError(f"dynamic_shapes names {sorted(extra)} are not arguments of "
                             f"forward ({names})")
        specs = [dynamic_shapes.get(nm) for nm in names]
    else:
        specs = list(dynamic_shapes)
        if len(specs) != n:
            raise ValueError(f"dynamic_shapes has {len(specs)} entries for {n} arguments")
    out = []
    for s in specs:
        if s is None:
            out.append({})
        elif isinstance(s, dict):
            out.append(dict(s))
        elif isinstance(s, (tuple, list)):
            out.append({i: d for i, d in enumerate(s) if d is not None})
        else:
            raise NotImplementedError("ember.export: dynamic_shapes entries are {dim: Dim}, "
                                      "a tuple of Dim/None, or None (nested inputs: static)")
    return out


def _resize(t, dims):
    """``t`` with each dim in ``dims`` resized to the given size by repeating its
    entries cyclically (values stay valid, e.g. embedding indices)."""
    a = t._data
    for d, size in dims.items():
        a = np.take(a, np.arange(size) % a.shape[d], axis=d)
    return _tensor._make(np.ascontiguousarray(a))


class ExportedProgram:
    """The captured program: ``.graph`` (the IR), ``.graph_signature``,
    ``.state_dict``, ``.range_constraints`` and ``.module()``."""

    def __init__(self, graph, state, dims, specs, names):
        self.graph = graph
        self.state_dict = state
        self._dims, self._specs, self._names = dims, specs, names
        self.range_constraints = {}
        for dm in dims:
            for d in dm.values():
                self.range_constraints[d.__name__] = ValueRange(d.min, d.max)
        self.graph_signature = ExportGraphSignature(
            [v.name for v in graph.inputs],
            [k for k, v in graph.params.items() if v.kind == "param"],
            [k for k, v in graph.params.items() if v.kind == "buffer"],
            [v.name for v in graph.outputs()])

    def __str__(self):
        rc = ", ".join(f"{k}: VR[{v.lower}, {v.upper}]" for k, v in self.range_constraints.items())
        return (f"ExportedProgram:\n{self.graph}\nGraph signature: {self.graph_signature}\n"
                f"Range constraints: {{{rc}}}\n")

    __repr__ = __str__

    def _check(self, args):
        if len(args) != len(self._specs):
            raise TypeError(f"Exported program expects {len(self._specs)} inputs, got "
                            f"{len(args)}")
        for i, (a, (shape, dtype), dm) in enumerate(zip(args, self._specs, self._dims)):
            where = f"*args[{i}]"
            if not isinstance(a, Tensor):
                raise TypeError(f"Expected input at {where} to be a tensor, got "
                                f"{type(a).__name__}")
            if a.dtype != dtype:
                raise RuntimeError(f"Expected input at {where}.dtype to be {dtype}, but got "
                                   f"{a.dtype}")
            if a.dim() != len(shape):
                raise RuntimeError(f"Unexpected number of dimensions in input at "
                                   f"{where}.shape (expected {len(shape)}, got {a.dim()})")
            for d, (got, want) in enumerate(zip(a.shape, shape)):
                dim = dm.get(d)
                if dim is None:
                    if got != want:
                        raise RuntimeError(f"Expected input at {where}.shape[{d}] to be equal "
                                           f"to {want}, but got {got}")
                elif got < dim.min:
                    raise RuntimeError(f"Expected input at {where}.shape[{d}] to be >= "
                                       f"{dim.min}, but got {got} (Dim {dim.__name__})")
                elif got > dim.max:
                    raise RuntimeError(f"Expected input at {where}.shape[{d}] to be <= "
                                       f"{dim.max}, but got {got} (Dim {dim.__name__})")

    def __call__(self, *args):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def module(self):
        """A callable module that checks its inputs against the constraints and replays
        the graph with this program's parameters and buffers."""
        from ember.nn.modules.module import Module
        prog = self

        class ExportedModule(Module):
            def forward(self, *args):
                prog._check(args)
                params = dict(self.named_parameters())
                params.update(self.named_buffers())
                return prog.graph.run(*args, params=params)

        m = ExportedModule()
        for qn, v in self.graph.params.items():
            *path, leaf = qn.split(".")
            owner = m
            for p in path:
                if p not in owner._modules:
                    owner.add_module(p, Module())
                owner = owner._modules[p]
            if v.kind == "param":
                owner.register_parameter(leaf, self.state_dict[qn])
            else:
                owner.register_buffer(leaf, self.state_dict[qn])
        return m


def _strict_capture(model, args):
    graph, _, breaks, train, extras = capture_graph(model, args, model, whole_rnn=True)
    if train is not None:
        breaks = ["backward() inside the exported forward (export captures a forward only)"]
    elif extras is not None:
        raise NotImplementedError(
            "ember.export: the forward changes an input, parameter or buffer in place "
            "(a training-mode BatchNorm's num_batches_tracked...); ember's ExportedProgram "
            "does not record mutations: export the model in eval mode")
    if breaks:
        raise Unsupported(f"ember.export: cannot capture {breaks[0]}"
                          + (f" (and {len(breaks) - 1} more)" if len(breaks) > 1 else ""))
    return graph


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=True,
           preserve_module_call_signature=()):
    """Capture ``mod``'s forward on ``args`` into an :class:`ExportedProgram`.
    ``dynamic_shapes`` marks sizes symbolic with :class:`Dim`; each is checked by a
    second capture at another size (the same graph must come out). Anything the
    capture cannot record raises :class:`ember._compile.Unsupported`."""
    from ember.nn.modules.module import Module
    if not isinstance(mod, Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if kwargs:
        raise NotImplementedError("ember.export: pass inputs positionally (kwargs)")
    if not strict:
        raise NotImplementedError("ember.export: strict=False (the non-strict tracer); "
                                  "ember has one capture, which is strict")
    if not isinstance(args, tuple):
        raise ValueError(f"Expecting `args` to be a tuple of example positional inputs, got "
                         f"{type(args)}")
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise NotImplementedError(f"ember.export: input {i} is a {type(a).__name__}; "
                                      "only tensor inputs are supported")
    from ember._graph.record import arg_names as _arg_names
    names = _arg_names(mod.forward, len(args))
    dims = _arg_dims(dynamic_shapes, names, len(args))
    for i, (a, dm) in enumerate(zip(args, dims)):
        for d, dim in dm.items():
            if not isinstance(dim, Dim):
                raise NotImplementedError(f"ember.export: dynamic_shapes[{i}][{d}] must be "
                                          f"a Dim, got {dim!r}")
            if not 0 <= d < a.dim():
                raise ValueError(f"dynamic_shapes: dim {d} out of range for input {i} of "
                                 f"rank {a.dim()}")
            n = a.shape[d]
            if not dim.min <= n <= dim.max:
                raise ConstraintViolationError(
                    f"Constraints violated ({dim.__name__})! the example's size {n} at "
                    f"args[{i}].shape[{d}] is outside [{dim.min}, {dim.max}]")
            if n < 2:
                raise ConstraintViolationError(
                    f"Constraints violated ({dim.__name__})! You marked {dim.__name__} as "
                    f"dynamic but the example has size {n}, which is specialized; use an "
                    "example of size >= 2")
    buffers = {k: b._data.copy() for k, b in mod.named_buffers() if b is not None}
    graph = _strict_capture(mod, args)
    if any(dims):
        probe = []
        for a, dm in zip(args, dims):
            sizes = {}
            for d, dim in dm.items():
                n = a.shape[d]
                sizes[d] = n + 1 if n + 1 <= dim.max else n - 1
            probe.append(_resize(a, sizes) if sizes else a)
        marked = sorted({d.__name__ for dm in dims for d in dm.values()})
        try:
            second = _strict_capture(mod, tuple(probe))
        except (RuntimeError, ValueError, IndexError) as e:
            raise ConstraintViolationError(
                f"Constraints violated ({', '.join(marked)})! The model fails at another "
                f"size of a dimension marked dynamic: {e}") from e
        finally:
            for k, b in mod.named_buffers():  # the probe must not move running statistics
                if k in buffers:
                    b._data[...] = buffers[k]
        if signature(second) != signature(graph):
            raise ConstraintViolationError(
                f"Constraints violated ({', '.join(marked)})! The captured graph depends on "
                "the value of a size marked dynamic (a literal size, a Python int made from "
                "a size, or a branch on it); mark it static or make the model size-generic")
    state = {k: v.data for k, v in graph.params.items()}
    specs = [(tuple(a.shape), a.dtype) for a in args]
    return ExportedProgram(graph, state, dims, specs, names)
