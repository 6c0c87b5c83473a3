"""accelerate's documented basic use: ``Accelerator().prepare(model, optimizer,
dataloader, scheduler)`` on CPU after ``set_seed``, a training loop with
``accelerator.backward``, gradient accumulation (``accumulate``), ``clip_grad_norm_``,
``gather_for_metrics`` in evaluation, ``unwrap_model``, ``get_state_dict`` and
``save_state``/``load_state``. The numbers go to the .npz file named on the command line."""
import sys
import tempfile
import time

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((80, 6)), dtype=torch.float32)
Y = torch.tensor(rng.integers(0, 3, 80))
start = time.perf_counter()
set_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(16, 3))
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=10)
train = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True)
evaluation = DataLoader(TensorDataset(X[:30], Y[:30]), batch_size=8)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
model, optimizer, train, evaluation, scheduler = accelerator.prepare(
    model, optimizer, train, evaluation, scheduler)
out = {"init": torch.cat([p.detach().flatten() for p in model.parameters()]).numpy()}
losses, norms, lrs = [], [], []
for epoch in range(2):
    model.train()
    for x, y in train:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                norms.append(accelerator.clip_grad_norm_(model.parameters(), 1.0).item())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        losses.append(loss.item())
        lrs.append(scheduler.get_last_lr()[0])
    model.eval()
    predictions = []
    with torch.no_grad():
        for x, _ in evaluation:
            predictions.append(accelerator.gather_for_metrics(model(x).argmax(-1)))
    out[f"eval_predictions{epoch}"] = torch.cat(predictions).numpy()
out["losses"], out["norms"], out["lrs"] = np.array(losses), np.array(norms), np.array(lrs)
out["steps"] = np.array([optimizer.optimizer.state[p]["step"].item()
                         for p in model.parameters()])
unwrapped = accelerator.unwrap_model(model)
out["trained"] = torch.cat([p.detach().flatten() for p in unwrapped.parameters()]).numpy()
out["state_keys"] = np.array(sorted(accelerator.get_state_dict(model)))
with tempfile.TemporaryDirectory() as tmp:
    accelerator.save_state(tmp)
    with torch.no_grad():
        for p in unwrapped.parameters():
            p.zero_()
    accelerator.load_state(tmp)
    out["reloaded"] = torch.cat([p.detach().flatten() for p in unwrapped.parameters()]).numpy()
    out["reloaded_exp_avg"] = torch.cat([optimizer.optimizer.state[p]["exp_avg"].flatten()
                                         for p in model.parameters()]).numpy()
elapsed = time.perf_counter() - start
np.savez(sys.argv[1], **out)
print("done", torch.__version__, round(elapsed, 2))
