"""Model ensembling, as the torch.func tutorial does it: several models' parameters
stacked with ``stack_module_state``, a base copy moved to the ``meta`` device, and
``vmap`` over ``functional_call`` with one minibatch per model and with one shared."""
import copy
import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

torch.manual_seed(0)


class SimpleMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


num_models = 4
data = torch.randn(20, 16, 1, 8, 8)
minibatches = data[:num_models]
models = [SimpleMLP() for _ in range(num_models)]
loop_diff = [m(b) for m, b in zip(models, minibatches)]
loop_same = [m(minibatches[0]) for m in models]

params, buffers = stack_module_state(models)
base = copy.deepcopy(models[0]).to("meta")


def fmodel(params, buffers, x):
    return functional_call(base, (params, buffers), (x,))


diff = vmap(fmodel)(params, buffers, minibatches)
same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatches[0])
print(json.dumps({
    "meta": [str(p.device) for p in base.parameters()][:1],
    "shapes": [list(diff.shape), list(same.shape)],
    "stacked": {k: list(v.shape) for k, v in params.items()},
    "diff_close": torch.allclose(diff, torch.stack(loop_diff), atol=1e-5),
    "same_close": torch.allclose(same, torch.stack(loop_same), atol=1e-5),
    "sum": round(diff.sum().item(), 3)}))
