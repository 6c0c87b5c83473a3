"""Forward-mode AD as the forward-AD tutorial uses it: dual tensors, modules with dual
parameters, ``functional_call``, a custom Function with ``jvp``, and functorch's
``jvp`` and ``make_functional_with_buffers``."""
import functools
import json
import warnings

import functorch as ft
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.func import functional_call

warnings.simplefilter("ignore", FutureWarning)
torch.manual_seed(0)
out = {}


def fn(x, y):
    return x ** 2 + y ** 2


primal, tangent = torch.randn(6, 6), torch.randn(6, 6)
with fwAD.dual_level():
    dual = fwAD.make_dual(primal, tangent)
    same = fwAD.unpack_dual(dual).tangent is tangent
    copied = fwAD.unpack_dual(fwAD.make_dual(primal, tangent.T)).tangent is not tangent
    res = fn(dual, torch.randn(6, 6))
    out["basic"] = round(fwAD.unpack_dual(res).tangent.sum().item(), 4)
out["tangent_gone"] = fwAD.unpack_dual(res).tangent is None
out["identity"] = [same, copied]

model, inp = nn.Linear(5, 5), torch.randn(8, 5)
params = dict(model.named_parameters())
tangents = {n: torch.rand_like(p) for n, p in params.items()}
with fwAD.dual_level():
    for n, p in params.items():
        delattr(model, n)
        setattr(model, n, fwAD.make_dual(p, tangents[n]))
    jvp1 = fwAD.unpack_dual(model(inp)).tangent
with fwAD.dual_level():
    duals = {n: fwAD.make_dual(p, tangents[n]) for n, p in params.items()}
    jvp2 = fwAD.unpack_dual(functional_call(nn.Linear(5, 5), duals, inp)).tangent
out["module"] = [round(jvp1.sum().item(), 4), torch.allclose(jvp1, jvp2)]


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = torch.exp(x)
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx, g):
        g = g * ctx.result
        del ctx.result
        return g


p64 = torch.randn(4, 4, dtype=torch.double, requires_grad=True)
with fwAD.dual_level():
    t = fwAD.unpack_dual(Exp.apply(fwAD.make_dual(p64, torch.randn(4, 4)))).tangent
out["custom"] = [round(t.sum().item(), 6), str(t.dtype).split(".")[-1],
                 torch.autograd.gradcheck(Exp.apply, (p64,), check_forward_ad=True,
                                          check_backward_ad=False, check_undefined_grad=False,
                                          check_batched_grad=False)]

p0, t0, p1, t1 = (torch.randn(6, 6) for _ in range(4))
po, to = ft.jvp(fn, (p0, p1), (t0, t1))
out["ft_jvp"] = [round(po.sum().item(), 4), round(to.sum().item(), 4)]
po, to = ft.jvp(functools.partial(fn, y=torch.randn(6, 6)), (p0,), (t0,))
out["ft_partial"] = round(to.sum().item(), 4)

model, inp = nn.Linear(5, 5), torch.randn(8, 5)
tangents = tuple(torch.rand_like(p) for p in model.parameters())
func, fparams, fbuffers = ft.make_functional_with_buffers(model)
mo, jo = ft.jvp(lambda ps: func(ps, fbuffers, inp), (fparams,), (tangents,))
out["make_functional"] = [len(fparams), len(fbuffers), round(mo.sum().item(), 4),
                          round(jo.sum().item(), 4)]
print(json.dumps(out))
