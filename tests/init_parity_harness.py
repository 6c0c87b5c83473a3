"""Seeded construction on ember and on torch: the same seed must give the same parameters,
buffers and generator state, bit for bit.

A *build* is a function ``build(lib)`` that seeds nothing itself and returns a module or
a tensor made with ``lib`` (``ember`` or ``torch``); :func:`compare_builds` seeds both
libraries alike, runs it on each and lists what differs: each parameter and buffer's
name (in order), dtype, shape, device and raw bytes (NaN payloads and signed zeros
included), whether a call raised (and the exception's class), and the default
generator's 5056-byte state afterwards, so the next draw is the same too.

:func:`module_db_cases` gives the builds for PyTorch's ModuleInfo table: every distinct
constructor input of every entry, under a default dtype of float32 and of float64, with
the factory keywords ``dtype=`` (float64, bfloat16), ``device="meta"`` and
``device=torch.device("cpu")`` where the constructor takes them, ``reset_parameters()``
called again on every submodule that has it, and a lazy module's first call.
"""
import inspect
import warnings

import numpy as np
import torch
from module_db_harness import _forward, infos, samples, to_ember

import ember

SEED = 1234


def _raw(t, lib):
    """A tensor's values as raw bytes in logical (C) order; None on the meta device."""
    if str(t.device) == "meta":
        return None
    if t.numel() == 0:
        return b""
    if lib is torch:
        return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return np.ascontiguousarray(t.detach().numpy()).tobytes()


def describe(obj, lib):
    """(name, dtype, shape, device, bytes) of every parameter then every buffer of a
    module (a lazy module's uninitialised ones by name only), or of one tensor."""
    if isinstance(obj, lib.Tensor):
        items = [("", obj)]
    elif isinstance(obj, tuple):  # tensors, e.g. a result and a generator's state
        items = [("" if i == 0 else f"[{i}]", t) for i, t in enumerate(obj)]
    else:
        items = list(obj.named_parameters()) + list(obj.named_buffers())
    out = []
    for name, t in items:
        if type(t).__name__ in ("UninitializedParameter", "UninitializedBuffer"):
            out.append((name, "uninitialized", None, None, None))
            continue
        out.append((name, str(t.dtype).split(".")[-1], tuple(t.shape),
                    str(t.device).split(":")[0], _raw(t, lib)))
    return out


def _run(build, lib, seed):
    lib.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            obj = build(lib)
        except Exception as ex:  # an outcome compared: both must raise alike
            return ex, lib.get_rng_state().numpy().tobytes()
    return describe(obj, lib), lib.get_rng_state().numpy().tobytes()


def compare_builds(build, seed=SEED):
    """What differs between ``build(ember)`` and ``build(torch)`` after the same seed: a
    list of strings, empty when everything is the same bit for bit."""
    t_out, t_state = _run(build, torch, seed)
    e_out, e_state = _run(build, ember, seed)
    if isinstance(t_out, Exception) or isinstance(e_out, Exception):
        if isinstance(t_out, Exception) and isinstance(e_out, Exception):
            if isinstance(e_out, type(t_out)):
                return [] if e_state == t_state else ["generator state after the error"]
            return [f"ember raises {type(e_out).__name__}: {str(e_out)[:100]}, torch "
                    f"{type(t_out).__name__}: {str(t_out)[:100]}"]
        if isinstance(e_out, Exception):
            return [f"ember raises {type(e_out).__name__}: {str(e_out)[:120]}"]
        return [f"torch raises {type(t_out).__name__}: {str(t_out)[:120]}, ember does not"]
    msgs = []
    if [d[0] for d in e_out] != [d[0] for d in t_out]:
        return [f"names {[d[0] for d in e_out]} != {[d[0] for d in t_out]}"]
    for e, t in zip(e_out, t_out):
        name = e[0] or "tensor"
        if e[1:4] != t[1:4]:
            msgs.append(f"{name}: dtype/shape/device {e[1:4]} != {t[1:4]}")
        elif e[4] != t[4]:
            msgs.append(f"{name}: values")
    if e_state != t_state:
        msgs.append("generator state")
    return msgs


# ----- PyTorch's ModuleInfo table ------------------------------------------------------
_FACTORY = [("dtype=float64", {"dtype": "float64"}), ("dtype=bfloat16", {"dtype": "bfloat16"}),
            ("device=meta", {"device": "meta"}), ("device=cpu", {"device": "cpu_device"})]


def _factory_kwargs(lib, spec):
    out = {}
    for k, v in spec.items():
        if k == "dtype":
            out[k] = getattr(lib, v)
        elif v == "cpu_device":
            out[k] = lib.device("cpu")
        else:
            out[k] = v
    return out


def _takes_factory_kwargs(cls):
    params = inspect.signature(cls.__init__).parameters
    return "dtype" in params and "device" in params


def _reset_all(mod):
    for sub in mod.modules():
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset):
            reset()
    return mod


def _module_build(info, sample, default_dtype, factory, after):
    """A build for one constructor input: ``after`` is None, "reset" or "lazy"."""
    ci = sample.constructor_input
    memo = {}
    e_args, e_kwargs = to_ember(ci.args, memo), to_ember(ci.kwargs, memo)
    ecls = getattr(ember.nn, info.module_cls.__name__)

    def build(lib):
        args, kwargs, cls = ((ci.args, ci.kwargs, info.module_cls) if lib is torch
                             else (e_args, e_kwargs, ecls))
        saved = lib.get_default_dtype()
        lib.set_default_dtype(getattr(lib, default_dtype))
        try:
            mod = cls(*args, **kwargs, **_factory_kwargs(lib, factory or {}))
        finally:
            lib.set_default_dtype(saved)
        if after == "reset":
            _reset_all(mod)
        elif after == "lazy":
            with lib.no_grad():
                if lib is torch:
                    _forward(mod, sample.forward_input, None, None)
                else:
                    _forward(mod, sample.forward_input, {}, to_ember)
        return mod
    return build


_CASES = []


def module_db_cases():
    """(case id, build) for every distinct constructor input of every ModuleInfo entry
    and every variant (see the module docstring); made once."""
    if not _CASES:
        _CASES.extend(_module_db_cases())
    return _CASES


def _module_db_cases():
    cases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, info in infos().items():
            seen = set()
            factory_ok = _takes_factory_kwargs(info.module_cls)
            for s in samples(info, torch.float32, True):
                ci = s.constructor_input
                key = repr((ci.args, ci.kwargs))
                if key in seen:
                    continue
                seen.add(key)
                base = f"{name}/{len(seen) - 1}"
                variants = [("default=float32", "float32", None, None),
                            ("default=float64", "float64", None, None),
                            ("reset_parameters", "float32", None, "reset")]
                if factory_ok:
                    variants += [(label, "float32", spec, None) for label, spec in _FACTORY]
                if issubclass(info.module_cls, torch.nn.modules.lazy.LazyModuleMixin):
                    variants.append(("first call", "float32", None, "lazy"))
                for label, dd, spec, after in variants:
                    cases.append((f"{base}:{label}", _module_build(info, s, dd, spec, after)))
    return cases
