"""Models a user builds after ``torch.manual_seed``, with the libraries' own
constructors and initialisation code: timm's ``create_model`` (a ResNet, a ViT with its
``trunc_normal_`` init, a ConvNeXt, an EfficientNet) and transformers' model classes
from small configs (GPT-2, BERT, Llama, T5, ViT; float32, and GPT-2 and Llama in
bfloat16 too). Every parameter and buffer and the generator's state after each build
go to the .npz file named on the command line, as raw bits, for a comparison bit for
bit (tests/test_init_parity.py).

Usage: ``seeded_builds.py OUT.npz [timm|transformers ...]`` (both by default)."""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

out = {}


def record(key, model):
    """Each tensor of the state dict as float64 (exact for every float dtype here) with
    its dtype name, and the generator's state."""
    for name, t in model.state_dict().items():
        t = t.detach()
        out[f"{key}/{name}"] = t.double().numpy() if t.is_floating_point() else t.numpy()
        out[f"{key}/{name}:dtype"] = np.array(str(t.dtype).split(".")[-1])
    out[f"{key}:rng"] = torch.get_rng_state().numpy()


def timm_models():
    import torchvision_placeholders
    torchvision_placeholders.install()
    import timm
    for key, arch, kwargs in (
            ("resnet", "resnet18", dict(channels=(8, 16, 24, 32), stem_width=8)),
            ("vit", "vit_tiny_patch16_224", dict(img_size=32, patch_size=8, embed_dim=32,
                                                 depth=2, num_heads=2)),
            ("convnext", "convnext_atto", dict(dims=(8, 16, 24, 32), depths=(1, 1, 1, 1))),
            ("efficientnet", "test_efficientnet", {})):
        torch.manual_seed(0)
        record(f"timm/{key}", timm.create_model(arch, pretrained=False, num_classes=5,
                                                **kwargs))


def transformers_models():
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
    builds = {
        "gpt2": (GPT2LMHeadModel, GPT2Config(vocab_size=64, n_positions=32, n_embd=32,
                                             n_layer=2, n_head=2)),
        "bert": (BertForSequenceClassification, BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=48, max_position_embeddings=32, num_labels=3)),
        "llama": (LlamaForCausalLM, LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)),
        "t5": (T5ForConditionalGeneration, T5Config(
            vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=2,
            num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)),
        "vit": (ViTForImageClassification, ViTConfig(
            image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=48, num_labels=5)),
    }
    for key, (cls, config) in builds.items():
        torch.manual_seed(0)
        record(f"transformers/{key}", cls(config))
    for key in ("gpt2", "llama"):
        cls, config = builds[key]
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)  # what from_config(torch_dtype=...) does
        try:
            model = cls(config)
        finally:
            torch.set_default_dtype(torch.float32)
        record(f"transformers/{key}-bfloat16", model)


if __name__ == "__main__":
    which = sys.argv[2:] or ["timm", "transformers"]
    # transformers first: it looks for torchvision when imported, and must not find the
    # placeholders timm needs on torch
    if "transformers" in which:
        transformers_models()
    if "timm" in which:
        timm_models()
    np.savez(sys.argv[1], **out)
    print("done", torch.__version__, len(out))
