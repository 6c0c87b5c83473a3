"""Lightning's documented basic use: a LightningModule (training, validation and
prediction steps, ``self.log``, Adam with a StepLR schedule) trained by ``Trainer.fit``
for 2 epochs on CPU from a shuffled DataLoader after ``seed_everything``; then
``Trainer.validate``, ``Trainer.predict``, ``save_checkpoint`` and
``load_from_checkpoint``. The numbers go to the .npz file named on the command line."""
import os
import sys
import tempfile
import time

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, hidden=16, lr=0.01):
        super().__init__()
        self.save_hyperparameters()
        # no bias before batch norm: its gradient is zero up to rounding, which Adam
        # would scale up to full steps (in torch as in ember)
        self.model = torch.nn.Sequential(
            torch.nn.Linear(6, hidden, bias=False), torch.nn.BatchNorm1d(hidden), torch.nn.Tanh(),
            torch.nn.Dropout(0.2), torch.nn.Linear(hidden, 3))
        self.losses = []

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.losses.append(loss.detach().numpy())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def predict_step(self, batch, batch_idx):
        return self(batch[0]).softmax(-1)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt,
                "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)}


rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((96, 6)), dtype=torch.float32)
Y = torch.tensor(rng.integers(0, 3, 96))
start = time.perf_counter()
L.seed_everything(0)
net = Classifier()
out = {"init": torch.cat([p.detach().flatten() for p in net.parameters()]).numpy()}
trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
train = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(X[:48], Y[:48]), batch_size=24)
trainer.fit(net, train, val)
out["losses"] = np.array(net.losses)
out["epochs"] = np.array([trainer.current_epoch, trainer.global_step])
out["lr"] = np.array([trainer.optimizers[0].param_groups[0]["lr"]])
for key, value in sorted(trainer.callback_metrics.items()):
    out["fit_" + key] = value.numpy()
out["trained"] = torch.cat([p.detach().flatten() for p in net.parameters()]).numpy()
out["bn_stats"] = torch.cat([net.model[1].running_mean, net.model[1].running_var]).numpy()
for key, value in sorted(trainer.validate(net, val, verbose=False)[0].items()):
    out["validate_" + key] = np.array(value)
out["predict"] = torch.cat(trainer.predict(net, val)).numpy()
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model.ckpt")
    trainer.save_checkpoint(path)
    restored = Classifier.load_from_checkpoint(path).eval()
    out["restored_hparams"] = np.array([restored.hparams.hidden, restored.hparams.lr])
    with torch.no_grad():
        out["restored_eval"] = restored(X[:8]).numpy()
    out["checkpoint_keys"] = np.array(sorted(torch.load(path, weights_only=False)))
elapsed = time.perf_counter() - start
np.savez(sys.argv[1], **out)
print("done", torch.__version__, round(elapsed, 2))
