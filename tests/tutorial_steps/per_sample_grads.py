"""Per-sample gradients, as the torch.func tutorial computes them: a loop of
single-sample backward passes, then ``vmap(grad(loss))`` over ``functional_call``;
prints both and their largest difference."""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


model = Net()
data = torch.randn(16, 1, 8, 8)
targets = torch.randint(10, (16,))


def loss_fn(predictions, targets):
    return F.nll_loss(predictions, targets)


def compute_grad(sample, target):
    loss = loss_fn(model(sample.unsqueeze(0)), target.unsqueeze(0))
    return torch.autograd.grad(loss, list(model.parameters()))


loop = [compute_grad(data[i], targets[i]) for i in range(len(data))]
loop = [torch.stack(shards) for shards in zip(*loop)]

params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}


def compute_loss(params, buffers, sample, target):
    out = functional_call(model, (params, buffers), (sample.unsqueeze(0),))
    return loss_fn(out, target.unsqueeze(0))


per_sample = vmap(grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, data,
                                                                 targets)
diff = max((per_sample[name] - g).abs().max().item()
           for g, name in zip(loop, params))
print(json.dumps({"shapes": [list(per_sample[n].shape) for n in params],
                  "sums": [round(per_sample[n].sum().item(), 4) for n in params],
                  "loop_sums": [round(g.sum().item(), 4) for g in loop],
                  "max_diff_below_1e-5": diff < 1e-5}))
