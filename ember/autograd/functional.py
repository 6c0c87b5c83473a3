"""Higher-level differentiation of whole functions: ``jacobian``, ``hessian``, ``vjp``,
``jvp``, ``hvp`` and ``vhp`` (``torch.autograd.functional``).

``jvp`` runs in forward mode and ``hvp`` forward over reverse (see
``autograd.forward_ad``), except with ``create_graph``/``strict``, where they use the
double-backward trick as PyTorch does; ``vectorize=True`` gives the same result as the
loop (ember has no vmap here).
"""
from ember._tensor import Tensor
from ember.autograd.grad_mode import enable_grad, set_grad_enabled
from ember.autograd.grad_mode import state as _grad_state

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(inp, arg_name, fn_name):
    is_tuple = isinstance(inp, tuple)
    if not is_tuple:
        inp = (inp,)
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but {where} has type {type(el)}.")
    return is_tuple, inp


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    # always new Tensor objects, so the inputs given as arguments are told apart from
    # the same tensors captured by the user's function
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but "
                               f"got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} but "
                               f"got {el_v.size()}.")


_STRICT_MSGS = {
    "outputs": ("Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided "
                 "function with respect to input {i} is independent of the input. This is not "
                 "allowed in strict mode. You should ensure that your function is twice "
                 "differentiable and that the jacobian depends on the inputs (this would be "
                 "violated by a linear function for example)."),
    "hessian": ("The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should "
                "ensure that your function is thrice differentiable and that the hessian "
                "depends on the inputs."),
}


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not inp.requires_grad:
            raise RuntimeError(_STRICT_MSGS[input_type].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    from ember.autograd import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grads = [], []
    for out, g in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grads.append(g)
    if not new_outputs:
        return (None,) * len(inputs)
    return grad(new_outputs, inputs, new_grads, allow_unused=True, create_graph=create_graph,
                retain_graph=retain_graph)


_STAGE_MSGS = {
    "back": ("The output of the user-provided function is independent of input {i}. This is "
             "not allowed in strict mode."),
    "back_trick": ("The gradient with respect to the input is independent of entry {i} in the "
                   "grad_outputs when using the double backward trick to compute forward mode "
                   "gradients. This is not allowed in strict mode."),
    "double_back": ("The jacobian of the user-provided function is independent of input {i}. "
                    "This is not allowed in strict mode."),
    "double_back_trick": ("The hessian of the user-provided function is independent of entry "
                          "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                          "prevents from using the double backward trick to replace forward "
                          "mode AD."),
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    from ember._factory import zeros_like
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_STAGE_MSGS[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        res.append(g)
    return tuple(res)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

    ``v`` may be None only when ``func`` returns a single one-element tensor.
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
    with set_grad_enabled(True if create_graph else _grad_state.grad_enabled):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def _fw_available(create_graph, strict):
    from ember.autograd import forward_ad
    return not create_graph and not strict and forward_ad._current[0] is None


def _forward_mode(func, inputs, tangents, name):
    """``(outputs, tangents)`` of ``func`` at ``inputs`` in one forward-mode pass."""
    from ember._factory import zeros_like
    from ember.autograd import forward_ad
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(x.detach(), t.detach())
                      for x, t in zip(inputs, tangents))
        outputs = func(*duals)
        is_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", name)
        tans = []
        for o in outputs:
            t = forward_ad.unpack_dual(o).tangent
            tans.append(zeros_like(o).detach() if t is None else t.detach())
        outputs = tuple(o.detach() for o in outputs)
    return is_tuple, outputs, tuple(tans)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product, in forward mode (one pass with
    the tangents riding along); with ``create_graph`` or ``strict``, or inside an open
    forward-AD level, by the double-backward trick as PyTorch computes it.

    ``v`` may be None only when the input is a single one-element tensor.
    """
    from ember._factory import ones_like, zeros_like
    if _fw_available(create_graph, strict):
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        else:
            v = (ones_like(inputs[0]),)
        is_outputs_tuple, outputs, res = _forward_mode(func, inputs, v, "jvp")
        return (_tuple_postprocess(outputs, is_outputs_tuple),
                _tuple_postprocess(res, is_outputs_tuple))
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # backward is linear in grad_outputs, so their value does not matter
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else _grad_state.grad_enabled):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_outputs_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: ``out.shape + in.shape`` per (output, input).

    A tensor for one input and one output; a tuple over inputs or outputs when they are
    tuples, nested as ``jac[output][input]``. ``vectorize=True`` is accepted and gives
    the same result (computed by a loop of reverse-mode passes).

        >>> ember.autograd.functional.jacobian(lambda x: x ** 2, ember.tensor([1., 2.]))
        tensor([[2., 0.],
                [0., 4.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or '
                             '"reverse-mode". Hint: If your function has more outputs than '
                             'inputs, "forward-mode" tends to be more performant. Otherwise, '
                             'prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported together '
                                      "(yet). Please either set `create_graph=False` or "
                                      '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-"
                                      "reverse Hessian is only implemented for "
                                      "`vectorize=True`.")
        return _jacobian_forward(func, inputs)
    if vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")
    from ember._factory import zeros, zeros_like
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        jac = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            for j in range(out.nelement()):
                onehot = zeros(out.nelement(), dtype=out.dtype, device=out.device)
                onehot._data[j] = 1
                vj = _autograd_grad((out,), inputs, (onehot.view(out.shape),),
                                    retain_graph=True, create_graph=create_graph)
                for k, (row, g, inp) in enumerate(zip(rows, vj, inputs)):
                    if g is not None:
                        if strict and create_graph and not g.requires_grad:
                            raise RuntimeError(
                                "The jacobian of the user-provided function is independent of "
                                f"input {i}. This is not allowed in strict mode when "
                                "create_graph=True.")
                        row.append(g)
                    else:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {k}. This is not allowed in strict mode.")
                        row.append(zeros_like(inp))
            jac.append(tuple(
                (_stack(row) if row else zeros((0,) + tuple(inputs[k].shape),
                                               dtype=inputs[k].dtype))
                .view(tuple(out.shape) + tuple(inputs[k].shape))
                for k, row in enumerate(rows)))
        jac = _grad_postprocess(tuple(jac), create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _jacobian_forward(func, inputs):
    """``jacobian(strategy="forward-mode")``: one forward-mode pass per input element (a
    one-hot tangent), a column of every output's Jacobian each."""
    from ember import stack
    from ember._factory import zeros, zeros_like
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = tuple(x.detach() for x in inputs)
    zs = [zeros_like(x) for x in inputs]
    cols = [[] for _ in inputs]
    outputs = is_outputs_tuple = None
    for k, x in enumerate(inputs):
        for e in range(x.nelement()):
            onehot = zeros(x.nelement(), dtype=x.dtype)
            onehot._data[e] = 1
            ts = list(zs)
            ts[k] = onehot.view(x.shape)
            is_outputs_tuple, outputs, tans = _forward_mode(func, inputs, ts, "jacobian")
            cols[k].append(tans)
    if outputs is None:
        is_outputs_tuple, outputs, _ = _forward_mode(func, inputs, zs, "jacobian")
    jac = tuple(tuple(
        (stack([c[i] for c in cols[k]], -1) if cols[k] else
         zeros(tuple(o.shape) + (0,), dtype=o.dtype)).view(tuple(o.shape) +
                                                           tuple(inputs[k].shape))
        for k in range(len(inputs))) for i, o in enumerate(outputs))
    return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _stack(rows):
    """``stack(rows, 0)``, differentiable when a row requires grad."""
    import ember
    if hasattr(ember, "stack"):
        return ember.stack(rows, 0)
    from ember._tensor import _make
    from ember.backend import array_module
    xp = array_module(rows[0]._data)
    if not any(r.requires_grad for r in rows):
        return _make(xp.stack([r._data for r in rows]))
    # no stack op yet: place each row with a one-hot mask (differentiable, O(n^2))
    out = None
    for j, r in enumerate(rows):
        mask = xp.zeros((len(rows),) + (1,) * r.ndim, dtype=r._data.dtype)
        mask[j] = 1
        term = _make(mask) * r.unsqueeze(0)
        out = term if out is None else out + term
    return out


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function ``func`` at ``inputs``: ``in.shape + in.shape``.

    For a tuple of inputs, a tuple of tuples ``hess[i][j]`` of shape
    ``inputs[i].shape + inputs[j].shape``.

        >>> ember.autograd.functional.hessian(lambda x: (x ** 3).sum(), ember.tensor([1., 2.]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or '
                             '"reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function",
                                        "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(func, inputs, name, strict):
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                          name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should "
                           "contain a single element")
    return is_outputs_tuple, outputs


def _prepare_v(v, inputs, is_inputs_tuple, create_graph, name):
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].nelement() != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided "
                           "function is a single Tensor with a single element.")
    return v


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``: vector-Hessian product of a scalar function."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "vhp")
        is_outputs_tuple, outputs = _scalar_output(func, inputs, "vhp", strict)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
    with set_grad_enabled(True if create_graph else _grad_state.grad_enabled):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``: Hessian-vector product of a scalar function, forward over
    reverse (the gradient's tangent along ``v``: one forward and one backward pass carrying
    tangents); with ``create_graph`` or ``strict``, or inside an open forward-AD level, by
    the double-backward trick as PyTorch computes it."""
    from ember._factory import zeros_like
    if _fw_available(create_graph, strict) and v is not None:
        return _hvp_forward(func, inputs, v)
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _prepare_v(v, inputs, is_inputs_tuple, create_graph, "hvp")
        is_outputs_tuple, outputs = _scalar_output(func, inputs, "hvp", strict)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else _grad_state.grad_enabled):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def _hvp_forward(func, inputs, v):
    from ember._factory import zeros_like
    from ember.autograd import forward_ad
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
    _, v = _as_tuple(v, "v", "hvp")
    _validate_v(v, inputs, is_inputs_tuple)
    with forward_ad.dual_level(), enable_grad():
        leaves = tuple(x.detach().requires_grad_(True) for x in inputs)
        duals = tuple(forward_ad.make_dual(x, t.detach()) for x, t in zip(leaves, v))
        is_outputs_tuple, outputs = _scalar_output(func, duals, "hvp", False)
        grads = _autograd_grad(outputs, duals, create_graph=True)
        res = []
        for g, x in zip(grads, inputs):
            t = None if g is None else forward_ad.unpack_dual(g).tangent
            res.append(zeros_like(x) if t is None else t.detach())
        outputs = tuple(forward_ad.unpack_dual(o).primal.detach() for o in outputs)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(tuple(res), is_inputs_tuple))
