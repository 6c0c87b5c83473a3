"""Fit a cubic polynomial to sin(x) with ember's autograd, as in PyTorch's tutorial.

    python examples/polynomial.py
"""
import math
import time

import ember as torch


def main(steps=2000, lr=1e-6):
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    a, b, c, d = (torch.tensor(v, requires_grad=True) for v in (0.1, -0.2, 0.3, -0.1))
    start = time.perf_counter()
    for t in range(steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if t % 200 == 199:
            print(f"step {t + 1:5d}  loss {loss.item():12.4f}")
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= lr * p.grad
                p.grad = None
    took = time.perf_counter() - start
    print(f"Result: y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + "
          f"{d.item():.4f} x^3   ({steps} steps in {took:.2f} s)")
    return loss.item()


if __name__ == "__main__":
    main()
