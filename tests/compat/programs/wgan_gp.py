"""One WGAN-GP setup (Gulrajani et al. 2017) on a 2-D toy distribution and on 8x8
images: critic steps with a gradient penalty through autograd.grad(create_graph=True),
generator steps, Adam with betas (0.5, 0.9). Prints the losses.

Adam turns gradient elements that are rounding noise (a bias whose exact gradient is
0 comes out as 0 in one library and 7e-9 in the other) into full steps, so the float32
MLP run drifts apart by ~1e-3 after a few iterations; in float64 both libraries print
identical numbers."""
import argparse

import torch
import torch.nn as nn
from torch import autograd


def gradient_penalty(critic, real, fake):
    alpha = torch.rand(real.size(0), *([1] * (real.dim() - 1)))
    inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    out = critic(inter)
    grads = autograd.grad(outputs=out, inputs=inter, grad_outputs=torch.ones_like(out),
                          create_graph=True, retain_graph=True, only_inputs=True)[0]
    grads = grads.view(grads.size(0), -1)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


def toy_real(n):
    centers = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    return centers[torch.randint(0, 4, (n,))] * 2 + 0.05 * torch.randn(n, 2)


def image_real(n):
    """8x8 images of a blurred square at a random place."""
    img = torch.zeros(n, 1, 8, 8)
    pos = torch.randint(0, 5, (n, 2))
    for i in range(n):
        r, c = pos[i].tolist()
        img[i, 0, r:r + 3, c:c + 3] = 1.0
    return img * 2 - 1


class ConvCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
        )
        self.out = nn.Linear(16 * 2 * 2, 1)

    def forward(self, x):
        return self.out(self.main(x).flatten(1))


class ConvGenerator(nn.Module):
    def __init__(self, nz):
        super().__init__()
        self.fc = nn.Linear(nz, 16 * 2 * 2)
        self.main = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1), nn.Tanh(),
        )

    def forward(self, z):
        return self.main(self.fc(z).view(-1, 16, 2, 2))


def train(kind, iters, n_critic=3, batch=32, nz=8, lam=10.0):
    if kind == "mlp":
        G = nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 2))
        D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32),
                          nn.LeakyReLU(0.2), nn.Linear(32, 1))
        sample = toy_real
    else:
        G, D, sample = ConvGenerator(nz), ConvCritic(), image_real
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    for it in range(iters):
        for p in D.parameters():
            p.requires_grad = True
        for _ in range(n_critic):
            real = sample(batch)
            z = torch.randn(batch, nz)
            with torch.no_grad():
                fake = G(z)
            D.zero_grad()
            d_real = D(real).mean()
            d_fake = D(fake).mean()
            gp = gradient_penalty(D, real, fake)
            d_loss = d_fake - d_real + lam * gp
            if it == 0 and opt_d.state == {}:
                print(f"{kind} first critic loss {d_loss.item():.6f} gp {gp.item():.6f}")
            d_loss.backward()
            opt_d.step()
        for p in D.parameters():
            p.requires_grad = False
        G.zero_grad()
        g_loss = -D(G(torch.randn(batch, nz))).mean()
        g_loss.backward()
        opt_g.step()
        print(f"{kind} iter {it} loss_d {d_loss.item():.6f} gp {gp.item():.6f} "
              f"loss_g {g_loss.item():.6f} w_dist {(d_real - d_fake).item():.6f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=8)
    args = p.parse_args()
    torch.manual_seed(3)
    train("mlp", args.iters)
    if hasattr(nn, "Conv2d"):
        train("conv", args.iters // 2)


if __name__ == "__main__":
    main()
