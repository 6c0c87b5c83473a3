"""Custom autograd Functions in the styles of PyTorch's "Extending PyTorch" notes:
ctx.save_for_backward / needs_input_grad, a straight-through estimator, a
non-differentiable output, the forward + setup_context form, gradcheck and
gradgradcheck, double backward, and a small training loop built on them."""
import torch
from torch.autograd import Function, gradcheck, gradgradcheck


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MyExp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy * y  # differentiable: double backward works


class RoundSTE(Function):
    """Round in forward, identity gradient in backward."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, gy):
        return gy


class SortWithIndex(Function):
    """Returns (values, indices); indices are marked non-differentiable."""

    @staticmethod
    def forward(x):
        idx = x.argsort(dim=-1)
        return x.gather(-1, idx), idx

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, idx = output
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)

    @staticmethod
    def backward(ctx, g_values, g_idx):
        (idx,) = ctx.saved_tensors
        return torch.zeros_like(g_values).scatter(-1, idx, g_values)


class ScaledTanh(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale  # a Python number kept on ctx
        t = torch.tanh(x)
        ctx.save_for_backward(t)
        return scale * t

    @staticmethod
    def backward(ctx, gy):
        (t,) = ctx.saved_tensors
        return gy * ctx.scale * (1 - t * t), None


def main():
    torch.manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.double, requires_grad=True)
    w = torch.randn(3, 4, dtype=torch.double, requires_grad=True)
    b = torch.randn(3, dtype=torch.double, requires_grad=True)
    print("gradcheck linear", gradcheck(LinearFunction.apply, (x, w, b), eps=1e-6, atol=1e-4))
    print("gradcheck exp", gradcheck(MyExp.apply, (x,)))
    print("gradgradcheck exp", gradgradcheck(MyExp.apply, (x,)))
    print("gradcheck tanh", gradcheck(lambda v: ScaledTanh.apply(v, 1.5), (x,)))

    torch.manual_seed(2)  # gradgradcheck draws its random grad_outputs from the RNG
    v = torch.randn(6, dtype=torch.double, requires_grad=True)
    y = MyExp.apply(v)
    (g,) = torch.autograd.grad(y.sum(), v, create_graph=True)
    (gg,) = torch.autograd.grad((g * g).sum(), v)
    print(f"double backward {gg.sum().item():.8f} node {y.grad_fn.__class__.__name__}")

    vals, idx = SortWithIndex.apply(v)
    print("sorted", idx.tolist(), idx.requires_grad, vals.requires_grad)
    (vals * torch.arange(6.0, dtype=torch.double)).sum().backward()
    print("scatter grad", v.grad.tolist())

    # train a 2-layer net built on the custom functions
    torch.manual_seed(1)
    data = torch.randn(64, 4)
    target = (data[:, :1] * 2 - data[:, 1:2]).round()
    w1 = torch.nn.Parameter(torch.randn(16, 4) * 0.3)
    b1 = torch.nn.Parameter(torch.zeros(16))
    w2 = torch.nn.Parameter(torch.randn(1, 16) * 0.3)
    opt = torch.optim.RMSprop([w1, b1, w2], lr=0.01, alpha=0.9)
    for step in range(40):
        h = ScaledTanh.apply(LinearFunction.apply(data, w1, b1), 2.0)
        out = LinearFunction.apply(h, w2)
        loss = ((RoundSTE.apply(out * 4) / 4 - target) ** 2).mean() + (out - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.6f}")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
