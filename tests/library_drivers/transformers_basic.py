"""Hugging Face transformers' documented basic use with tiny random-config models built
in code (nothing downloaded): GPT-2, BERT, Llama, T5 and ViT each run forward with a
loss, ``loss.backward()``, a few SGD steps, a ``state_dict`` round trip through
``torch.save``/``torch.load``, ``save_pretrained``/``from_pretrained`` through a
temporary directory, and greedy ``generate()`` for the language models; then the
``Trainer`` trains a tiny model for a few steps on a tiny dataset.

Usage: ``transformers_basic.py OUT.npz [MODEL ...]`` (models: gpt2 bert llama t5 vit
trainer; all by default). The numbers go to OUT.npz; the wall and CPU time of each
training step are printed (``step_seconds MODEL WALL CPU``) for the timings in
docs/compatibility.md (``tools/time_library_driver.py``)."""
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np
import torch
import transformers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTForImageClassification,
)

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
rng = np.random.default_rng(0)
out = {}
# training steps per model (more for timing: docs/compatibility.md)
STEPS = int(os.environ.get("DRIVER_STEPS", "3"))


def ids(shape, vocab):
    return torch.tensor(rng.integers(1, vocab, shape))


def gpt2():
    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    x = ids((2, 10), 64)
    return GPT2LMHeadModel, config, dict(input_ids=x, labels=x), x[:, :4]


def bert():
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=48,
                        max_position_embeddings=32, num_labels=3)
    x = ids((2, 10), 64)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    return (BertForSequenceClassification, config,
            dict(input_ids=x, attention_mask=mask, labels=torch.tensor([0, 2])), None)


def llama():
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    x = ids((2, 10), 64)
    return LlamaForCausalLM, config, dict(input_ids=x, labels=x), x[:, :4]


def t5():
    config = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                      num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    x = ids((2, 8), 64)
    return (T5ForConditionalGeneration, config, dict(input_ids=x, labels=ids((2, 5), 64)),
            x)


def vit():
    config = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
                       num_labels=5)
    pixels = torch.tensor(rng.standard_normal((2, 3, 16, 16)), dtype=torch.float32)
    return (ViTForImageClassification, config,
            dict(pixel_values=pixels, labels=torch.tensor([1, 4])), None)


def run_model(name, build):
    cls, config, batch, prompt = build()
    torch.manual_seed(0)
    model = cls(config)
    model.train()
    for k, v in model.state_dict().items():
        out[f"{name}/init/{k}"] = v.numpy().copy()
    result = model(**batch)
    out[f"{name}/loss0"] = result.loss.detach().numpy()
    out[f"{name}/logits0"] = result.logits.detach().numpy()
    result.loss.backward()
    for k, p in model.named_parameters():
        if p.grad is not None:
            out[f"{name}/grad/{k}"] = p.grad.numpy().copy()
    # SGD with momentum: AdamW (the Trainer's, below) turns the rounding noise of
    # gradients that are zero in exact arithmetic (attention key biases) into steps
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.step()
    for step in range(STEPS):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        print(f"step_seconds {name} {time.perf_counter() - t0:.6f} "
              f"{time.process_time() - c0:.6f}")
        out[f"{name}/loss{step + 1}"] = loss.detach().numpy()
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
    out[f"{name}/eval_logits"] = logits.numpy()
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model.state_dict(), os.path.join(tmp, "model.pt"))
        torch.manual_seed(1)
        again = cls(config)
        again.load_state_dict(torch.load(os.path.join(tmp, "model.pt")))
        again.eval()
        with torch.no_grad():
            out[f"{name}/reloaded_logits"] = again(**batch).logits.numpy()
        model.save_pretrained(tmp)
        out[f"{name}/saved_files"] = np.array(sorted(os.listdir(tmp)))
        pretrained = cls.from_pretrained(tmp)
        with torch.no_grad():
            out[f"{name}/pretrained_logits"] = pretrained(**batch).logits.numpy()
        out[f"{name}/pretrained_training"] = np.array(pretrained.training)
    if prompt is not None:
        generated = model.generate(prompt, max_new_tokens=6, do_sample=False)
        out[f"{name}/generated"] = generated.numpy()


def trainer():
    from transformers import Trainer, TrainingArguments

    class Tiny(torch.utils.data.Dataset):
        def __init__(self):
            g = np.random.default_rng(1)
            self.x = g.integers(1, 64, (16, 8))
            self.y = g.integers(0, 3, 16)

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return {"input_ids": torch.tensor(self.x[i]), "labels": torch.tensor(self.y[i])}

    _, config, _, _ = bert()
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, max_steps=STEPS + 1,
                                 per_device_train_batch_size=4,
                                 learning_rate=1e-2, logging_steps=1, save_strategy="no",
                                 report_to=[], use_cpu=True, seed=0, data_seed=0,
                                 dataloader_num_workers=0, disable_tqdm=True)
        t = Trainer(model=model, args=args, train_dataset=Tiny())
        t0, c0 = time.perf_counter(), time.process_time()
        result = t.train()
        print(f"step_seconds trainer {(time.perf_counter() - t0) / (STEPS + 1):.6f} "
              f"{(time.process_time() - c0) / (STEPS + 1):.6f}")
        out["trainer/losses"] = np.array([h["loss"] for h in t.state.log_history
                                          if "loss" in h])
        out["trainer/train_loss"] = np.array(result.training_loss)
        out["trainer/global_step"] = np.array(result.global_step)
        for k, v in model.state_dict().items():
            out[f"trainer/final/{k}"] = v.numpy().copy()
        metrics = t.evaluate(Tiny())
        out["trainer/eval_loss"] = np.array(metrics["eval_loss"])


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama, "t5": t5, "vit": vit}
names = sys.argv[2:] or [*MODELS, "trainer"]
for name in names:
    if name == "trainer":
        trainer()
    else:
        run_model(name, MODELS[name])
print("torch", torch.__version__, "transformers", transformers.__version__)
np.savez(sys.argv[1], **out)
