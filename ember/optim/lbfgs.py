"""L-BFGS, with an optional strong-Wolfe line search (a port of PyTorch's, after minFunc).

The algorithm works on one flat vector holding every parameter; it is kept as a
NumPy (or CuPy) array between closure calls. The scalars (dot products, curvature
products, the step length once a gradient or a Tensor ``lr`` enters it) are NumPy
scalars of the parameters' dtype where PyTorch's are 0-d tensors, so a float32 problem
is solved in float32 arithmetic as there (the same iterations, the same state dict).
"""
import math

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.optim.optimizer import Optimizer, _axpy, _check_lr, _real_pairs, _to_scalar

__all__ = ["LBFGS"]


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    # the minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), within bounds
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square) if isinstance(d2_square, np.generic) else math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _scalar(x):
    """A 0-d result, NumPy's or CuPy's, as a NumPy scalar of its dtype."""
    return x if isinstance(x, np.generic) else x.dtype.type(x.item())


def _dot(a, b):
    """``a @ b`` as a NumPy scalar of their dtype (PyTorch's 0-d tensor)."""
    from ember.backend import lapack
    with lapack.one_thread():  # OpenBLAS's threads change a long float64 dot's sum
        return _scalar(np.dot(a, b))


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    d_norm = _scalar(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)

    # bracket an interval containing a point satisfying the Wolfe criteria
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # interpolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1

    if ls_iter == max_ls:  # reached the maximum number of iterations
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: refine the bracket until a point satisfies the criteria
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # stay away from the bracket's ends unless progress is insufficient
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new.copy()
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new.copy()
            bracket_gtd[low_pos] = gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


def _arr(x):
    return x._data if isinstance(x, Tensor) else x


def _num(x):
    """A state scalar as ``_step`` computes with it: a 0-d tensor's NumPy scalar."""
    return _scalar(x._data[()]) if isinstance(x, Tensor) else x


def _stored(x):
    """A scalar as PyTorch keeps it in the state: a 0-d tensor where it is one there."""
    return _make(np.asarray(x)) if isinstance(x, np.generic) else x


class LBFGS(Optimizer):
    r"""L-BFGS, as ``torch.optim.LBFGS`` (heavily inspired by minFunc).

    ``step(closure)`` needs a closure that clears the gradients, computes the loss,
    calls ``backward`` and returns the loss; it may be called several times per step.
    Only one parameter group is supported, and all parameters must be on one device.

    The state (kept on the first parameter, as in PyTorch) holds ``func_evals``,
    ``n_iter``, the search direction ``d``, step ``t``, the histories ``old_dirs``,
    ``old_stps`` and ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss`` and ``al``.

    Args:
        params (iterable): parameters to optimize.
        lr (float or Tensor): learning rate (default: 1).
        max_iter (int): maximal number of iterations per step (default: 20).
        max_eval (int): maximal number of function evaluations per step
            (default: max_iter * 1.25).
        tolerance_grad (float): termination tolerance on first order optimality
            (default: 1e-7).
        tolerance_change (float): termination tolerance on function value/parameter
            changes (default: 1e-9).
        history_size (int): update history size (default: 100).
        line_search_fn (str): either 'strong_wolfe' or None (default: None).

    Example::

        >>> opt = ember.optim.LBFGS([x], line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad(); loss = f(x); loss.backward(); return loss
        >>> opt.step(closure)
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        # (a complex parameter counts as its real pairs, as in PyTorch)
        views = []
        for p in self._params:
            g = np.zeros_like(p._data) if p._grad is None else p._grad._data
            views.append((_real_pairs(g) if g.dtype.kind == "c" else g).reshape(-1))
        return np.concatenate(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            pd = _real_pairs(p._data) if p._data.dtype.kind == "c" else p._data
            n = pd.size
            # one rounding, as PyTorch's p.add_(update, alpha=step_size)
            _axpy(pd, step_size, update[offset:offset + n].reshape(pd.shape), out=pd)
            p._vc[0] += 1
            offset += n

    def _clone_param(self):
        return [p._data.copy() for p in self._params]

    def _set_param(self, params_data):
        for p, pdata in zip(self._params, params_data):
            p._data[...] = pdata
            p._vc[0] += 1

    def _evaluate(self, closure):
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = True
        try:
            return closure()
        finally:
            _grad_state.grad_enabled = prev

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(self._evaluate(closure))
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """Perform one L-BFGS step (up to ``max_iter`` iterations); returns the first loss.

        Args:
            closure (Callable): re-evaluates the model and returns the loss.
        """
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = False
        try:
            return self._step(closure)
        finally:
            _grad_state.grad_enabled = prev

    def _step(self, closure):
        group = self.param_groups[0]
        lr = _num(_to_scalar(group["lr"]))
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad = group["tolerance_grad"]
        tolerance_change = group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        history_size = group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._evaluate(closure)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if _scalar(np.abs(flat_grad).max()) <= tolerance_grad:
            return orig_loss

        d = _arr(state.get("d"))
        t = _num(state.get("t"))
        old_dirs = [_arr(v) for v in state.get("old_dirs") or []]
        old_stps = [_arr(v) for v in state.get("old_stps") or []]
        ro = [_num(v) for v in state.get("ro") or []]
        H_diag = _num(state.get("H_diag"))
        prev_flat_grad = _arr(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")

        n_iter = 0
        opt_cond = False
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # the descent direction
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # update the memory
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)  # (NumPy scalars: the parameters' dtype)
                    H_diag = ys / _dot(y, y)
                # the two-loop recursion for the approximate inverse Hessian times -g
                num_old = len(old_dirs)
                al = [None] * history_size
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    _axpy(q, -al[i], old_dirs[i], out=q)
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    _axpy(r, al[i] - be_i, old_stps[i], out=r)
                state["al"] = [None if a is None else _stored(a) for a in al]

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.copy()
            else:
                prev_flat_grad[...] = flat_grad
            prev_loss = loss

            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / _scalar(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = _scalar(np.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # re-evaluate unless this is the last iteration
                    loss = float(self._evaluate(closure))
                    flat_grad = self._gather_flat_grad()
                    opt_cond = _scalar(np.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # stopping conditions
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if _scalar(np.abs(d * t).max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = None if d is None else _make(d)
        state["t"] = _stored(t)
        state["old_dirs"] = [_make(v) for v in old_dirs]
        state["old_stps"] = [_make(v) for v in old_stps]
        state["ro"] = [_stored(v) for v in ro]
        state["H_diag"] = _stored(H_diag)
        state["prev_flat_grad"] = None if prev_flat_grad is None else _make(prev_flat_grad)
        state["prev_loss"] = prev_loss
        return orig_loss
