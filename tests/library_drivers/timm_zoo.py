"""A sweep over timm's model families (``timm.list_modules()``): one small variant per
family (the one with the fewest parameters that builds and runs in under 1.5 s
on torch; a few get tiny widths and depths through their keyword arguments), each built
after ``torch.manual_seed(0)`` by timm itself, in float64. At each input size it runs a
forward in training mode on a batch of 4, a ``cross_entropy`` loss and its backward,
then a forward in eval mode. The initial weights, logits, losses and every gradient go
to the .npz file named on the command line under the family's key; a build that raises
records its error (``KEY/error``), an input size the model refuses records the
exception's type (``KEY/SIZE/raises``), so one failure does not hide the others.

float64: batch norm over a batch of 4 and tiny feature maps turns float32's 1-ulp
differences into 1e-3 (see timm_models.py); in float64 every number agrees to 1e-9.

Usage: ``timm_zoo.py OUT.npz [FAMILY ...]`` (all of ``MODELS`` by default)."""

import numpy as np
import torch
import torchvision_placeholders
import zoo_runner

torchvision_placeholders.install()
import timm  # noqa: E402

# the large vision transformers at width 32, depth 2
TINY_VIT = dict(img_size=32, depth=2, embed_dim=32, num_heads=2)
# family: (model name, keyword arguments to create_model[, input sizes]); the input sizes
# are 32 and 48 unless given (a model built for 32 pixels may refuse 48: then both runs
# must raise the same type). Left out: ConvMixer, the Inception, NASNet and VGG
# families, MobileNetV5, DeepSeek's ViT (none has a variant that runs in under 1.5 s
# at these sizes)
MODELS = {
    "beit": ("beit_base_patch16_224", TINY_VIT),
    "byoanet": ("eca_botnext26ts_256", {"img_size": 32}),
    "byobnet": ("test_byobnet", {"img_size": 32}),
    "cait": ("cait_xxs24_224", {"img_size": 32}),
    "coat": ("coat_tiny", {"img_size": 32}),
    "convit": ("convit_tiny", {"img_size": 32}),
    "convnext": ("test_convnext", {}),
    "cpubone": ("cpubone_nano", {}),
    "crossvit": ("crossvit_tiny_240", {}),
    "csatv2": ("csatv2", {}, (64,)),
    "cspnet": ("cs3darknet_focus_s", {}),
    "cspnext": ("cspnext_tiny", {}),
    "davit": ("davit_tiny", {}),
    "deit": ("deit_tiny_patch16_224", {"img_size": 32}),
    "densenet": ("densenet121", {}),
    "dla": ("dla46x_c", {}),
    "dpn": ("dpn48b", {}),
    "edgenext": ("edgenext_xx_small", {}),
    "efficientformer": ("efficientformer_l1", {}, (224,)),
    "efficientformer_v2": ("efficientformerv2_s0", {"img_size": 32}),
    "efficientnet": ("test_efficientnet", {}),
    "efficientvim": ("efficientvim_m1", {}),
    "efficientvit_mit": ("efficientvit_b0", {}),
    "efficientvit_msra": ("efficientvit_m0", {"img_size": 32}),
    "eva": ("vit_tiny_patch16_dinov3_qkvb", {"img_size": 32}),
    "fasternet": ("fasternet_t0", {}),
    "fastvit": ("fastvit_t8", {}),
    "focalnet": ("focalnet_tiny_srf", {}),
    "gcvit": ("gcvit_xxtiny", {"img_size": 32}),
    "gemma4_vit": ("gemma4_vit_167m", TINY_VIT),
    "ghostnet": ("ghostnet_050", {}),
    "hardcorenas": ("hardcorenas_b", {}),
    "hgnet": ("hgnetv2_b0", {}),
    "hiera": ("hiera_tiny_224", {"img_size": 32}),
    "hieradet_sam2": ("sam2_hiera_tiny", {}),
    "hrnet": ("hrnet_w18_small", {}),
    "iformer": ("iformer_t", {}),
    "inception_next": ("inception_next_atto", {}),
    "lcnetv2": ("lcnetv2_small", {}),
    "levit": ("levit_128s", {"img_size": 32}),
    "lowformer": ("lowformer_b0", {}),
    "mambaout": ("test_mambaout", {}),
    "maxxvit": ("test_coatnet", {"img_size": 32}),
    "metaformer": ("poolformerv2_s12", {}),
    "mlp_mixer": ("gmlp_ti16_224", {"img_size": 32}),
    "mobilenetv3": ("lcnet_035", {}),
    "mobilevit": ("mobilevit_xxs", {"img_size": 32}),
    "mvitv2": ("mvitv2_tiny", {"img_size": 32}),
    "naflexvit": ("naflexvit_base_patch16_parfac_gap", TINY_VIT),
    "nest": ("nest_tiny", {"img_size": 32}),
    "nextvit": ("nextvit_small", {}),
    "nfnet": ("test_nfnet", {}),
    "pit": ("pit_ti_224", {"img_size": 32}),
    "pvt_v2": ("pvt_v2_b0", {}),
    "qwen3_vit": ("qwen3_vit_88m", TINY_VIT),
    "rdnet": ("rdnet_tiny", {}),
    "regnet": ("regnetx_002", {}),
    "repghost": ("repghostnet_050", {}),
    "repvit": ("repvit_m1", {"img_size": 32}),
    "res2net": ("res2next50", {}),
    "resnest": ("resnest14d", {}),
    "resnet": ("test_resnet", {}),
    "resnetv2": ("resnetv2_18", {}),
    "rexnet": ("rexnet_100", {}),
    "selecsls": ("selecsls42", {}),
    "senet": ("legacy_seresnet18", {}),
    "sequencer": ("sequencer2d_s", {"img_size": 32}),
    "shvit": ("shvit_s1", {}),
    "sknet": ("skresnet18", {}),
    "starnet": ("starnet_s050", {}),
    "swiftformer": ("swiftformer_xs", {"img_size": 32}),
    "swin_transformer": ("swin_tiny_patch4_window7_224", {"img_size": 32}),
    "swin_transformer_v2": ("swinv2_tiny_window16_256", {"img_size": 32}),
    "swin_transformer_v2_cr": ("swinv2_cr_tiny_224", {"img_size": 32}),
    "tiny_vit": ("tiny_vit_5m_224", {}),
    "tnt": ("tnt_s_legacy_patch16_224", {"img_size": 32}),
    "tresnet": ("tresnet_m", {}),
    "twins": ("twins_svt_small", {"img_size": 32}),
    "visformer": ("visformer_tiny", {"img_size": 32}),
    "vision_transformer": ("test_vit", {}),
    "vision_transformer_hybrid": ("vit_tiny_r_s16_p8_224", {"img_size": 32}),
    "vision_transformer_relpos": ("test_vit_relpos", {"img_size": 32}),
    "vision_transformer_sam": ("samvit_base_patch16", dict(TINY_VIT, global_attn_indexes=(1,),
                                                           window_size=2)),
    "vitamin": ("vitamin_small_224", {"img_size": 32}),
    "volo": ("volo_d1_224", {"img_size": 32}),
    "vovnet": ("ese_vovnet19b_slim_dw", {}),
    "xcit": ("xcit_nano_12_p16_224", {"img_size": 32}),
}
SIZES = (32, 48)


def fingerprint(tensors):
    """Per tensor: its sum, sum of absolute values, a sum weighted by a fixed cosine
    pattern and 8 of its elements, evenly spaced; computed in NumPy on both sides, so
    equal tensors give equal bits and a change anywhere shows (the models hold up to 30
    million parameters: whole arrays would make gigabytes)."""
    rows = []
    for t in tensors:
        a = t.detach().numpy().ravel()
        wave = np.cos(np.arange(a.size) * 0.7)
        picks = a[np.linspace(0, a.size - 1, 8).astype(np.int64)]
        rows.append(np.concatenate([[a.sum(), np.abs(a).sum(), a @ wave], picks]))
    return np.array(rows)


def run(key, out):
    arch, kwargs, *sizes = MODELS[key]
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    np.random.seed(0)
    model = timm.create_model(arch, pretrained=False, num_classes=5, **kwargs)
    params = list(model.parameters())
    out[f"{key}/init"] = fingerprint(params)
    out[f"{key}/param_sizes"] = np.array([p.numel() for p in params])
    for size in sizes[0] if sizes else SIZES:
        x = torch.tensor(rng.standard_normal((4, 3, size, size)))
        y = torch.tensor(rng.integers(0, 5, 4))
        try:
            model.train()
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
            model.zero_grad()
            loss.backward()
            model.eval()
            with torch.no_grad():
                evaluated = model(x)
        except Exception as e:  # compared by type with the other run's
            out[f"{key}/{size}/raises"] = np.array(type(e).__name__)
            continue
        out[f"{key}/{size}/logits"] = logits.detach().numpy()
        out[f"{key}/{size}/loss"] = loss.detach().numpy()
        out[f"{key}/{size}/grad"] = fingerprint(
            p.grad if p.grad is not None else torch.zeros_like(p) for p in params)
        out[f"{key}/{size}/eval"] = evaluated.numpy()


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    zoo_runner.main(run, MODELS, (torch.__version__, timm.__version__))
