"""A sweep over transformers' model classes with tiny random configs built in code
(nothing downloaded): each model is built after ``torch.manual_seed(0)``, run forward
in training mode with labels (dropout as configured), ``loss.backward()``, then in
eval mode; decoders and encoder-decoders also run greedy ``generate()``. The loss,
logits, every gradient and the generated tokens go to the .npz file named on the
command line, under the model's key; a model that raises records its error instead
(``KEY/error``), so one failure does not hide the others.

Usage: ``transformers_zoo.py OUT.npz [KEY ...]`` (all of ``MODELS`` by default)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import zoo_runner  # noqa: E402

transformers.logging.set_verbosity_error()

VOCAB = 64
# one shape for the decoder-only language models (attribute maps turn these names into
# each config's own: n_embd, n_layer...)
DECODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64,
               pad_token_id=0, bos_token_id=1, eos_token_id=2)
ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=48, max_position_embeddings=64, num_labels=3,
               pad_token_id=0)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
               decoder_ffn_dim=48, max_position_embeddings=64, pad_token_id=0,
               bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
VISION = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
              num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
              num_labels=5)

# key: (model class, config class, config kwargs, inputs)
MODELS = {
    "bert": ("BertForSequenceClassification", "BertConfig", ENCODER, "classify"),
    "roberta": ("RobertaForSequenceClassification", "RobertaConfig", ENCODER, "classify"),
    "distilbert": ("DistilBertForSequenceClassification", "DistilBertConfig",
                   dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                        max_position_embeddings=64, num_labels=3), "classify"),
    "albert": ("AlbertForSequenceClassification", "AlbertConfig",
               dict(ENCODER, embedding_size=16), "classify"),
    "electra": ("ElectraForSequenceClassification", "ElectraConfig",
                dict(ENCODER, embedding_size=16), "classify"),
    "deberta-v2": ("DebertaV2ForSequenceClassification", "DebertaV2Config",
                   dict(ENCODER, relative_attention=True, position_buckets=8,
                        pos_att_type=["p2c", "c2p"]), "classify"),
    "bert-mlm": ("BertForMaskedLM", "BertConfig", ENCODER, "masked"),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", DECODER, "causal"),
    "gpt-neo": ("GPTNeoForCausalLM", "GPTNeoConfig",
                dict(DECODER, attention_types=[[["global", "local"], 1]], window_size=4),
                "causal"),
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(DECODER, rotary_dim=4), "causal"),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(DECODER, ffn_dim=48, word_embed_proj_dim=32),
            "causal"),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(DECODER, n_head=4), "causal"),
    "falcon": ("FalconForCausalLM", "FalconConfig", DECODER, "causal"),
    "llama": ("LlamaForCausalLM", "LlamaConfig", DECODER, "causal"),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(DECODER, head_dim=8,
                                                            sliding_window=4), "causal"),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", DECODER, "causal"),
    "phi": ("PhiForCausalLM", "PhiConfig", DECODER, "causal"),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(DECODER, head_dim=8), "causal"),
    "t5": ("T5ForConditionalGeneration", "T5Config",
           dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                num_decoder_layers=2, num_heads=4, decoder_start_token_id=0,
                pad_token_id=0, eos_token_id=1), "seq2seq"),
    "bart": ("BartForConditionalGeneration", "BartConfig", SEQ2SEQ, "seq2seq"),
    "marian": ("MarianMTModel", "MarianConfig", dict(SEQ2SEQ, decoder_start_token_id=0),
               "seq2seq"),
    "vit": ("ViTForImageClassification", "ViTConfig", VISION, "image"),
    "deit": ("DeiTForImageClassification", "DeiTConfig", VISION, "image"),
    "swin": ("SwinForImageClassification", "SwinConfig",
             dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                  window_size=4, num_labels=5), "image"),
    "convnext": ("ConvNextForImageClassification", "ConvNextConfig",
                 dict(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, num_labels=5), "image"),
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig",
                dict(SEQ2SEQ, num_mel_bins=16, max_source_positions=8,
                     max_target_positions=16, decoder_start_token_id=1,
                     suppress_tokens=None, begin_suppress_tokens=None), "speech"),
    "wav2vec2": ("Wav2Vec2ForCTC", "Wav2Vec2Config",
                 dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=48, conv_dim=[16, 16],
                      conv_stride=[4, 2], conv_kernel=[8, 4], num_conv_pos_embeddings=8,
                      num_conv_pos_embedding_groups=4, pad_token_id=0,
                      ctc_loss_reduction="mean"), "ctc"),
    "xlm-roberta": ("XLMRobertaForSequenceClassification", "XLMRobertaConfig", ENCODER,
                    "classify"),
    "mpnet": ("MPNetForSequenceClassification", "MPNetConfig", ENCODER, "classify"),
    "megatron-bert": ("MegatronBertForSequenceClassification", "MegatronBertConfig", ENCODER,
                      "classify"),
    "gpt-bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", DECODER, "causal"),
    "codegen": ("CodeGenForCausalLM", "CodeGenConfig", dict(DECODER, rotary_dim=4, n_ctx=64),
                "causal"),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", DECODER, "causal"),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(DECODER, head_dim=8), "causal"),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(DECODER, head_dim=8,
                                                         sliding_window=4), "causal"),
    "olmo": ("OlmoForCausalLM", "OlmoConfig", DECODER, "causal"),
    "stablelm": ("StableLmForCausalLM", "StableLmConfig", DECODER, "causal"),
    "starcoder2": ("Starcoder2ForCausalLM", "Starcoder2Config", DECODER, "causal"),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig",
                dict(DECODER, num_local_experts=4, num_experts_per_tok=2), "causal"),
    "xglm": ("XGLMForCausalLM", "XGLMConfig", dict(DECODER, d_model=32, ffn_dim=48,
                                                   num_layers=2), "causal"),
    "biogpt": ("BioGptForCausalLM", "BioGptConfig", DECODER, "causal"),
    "mbart": ("MBartForConditionalGeneration", "MBartConfig", SEQ2SEQ, "seq2seq"),
    "pegasus": ("PegasusForConditionalGeneration", "PegasusConfig",
                dict(SEQ2SEQ, decoder_start_token_id=0), "seq2seq"),
    "m2m100": ("M2M100ForConditionalGeneration", "M2M100Config", SEQ2SEQ, "seq2seq"),
    "mt5": ("MT5ForConditionalGeneration", "MT5Config",
            dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2,
                 num_decoder_layers=2, num_heads=4, decoder_start_token_id=0,
                 pad_token_id=0, eos_token_id=1), "seq2seq"),
    "beit": ("BeitForImageClassification", "BeitConfig",
             dict(VISION, use_relative_position_bias=True), "image"),
    "dinov2": ("Dinov2ForImageClassification", "Dinov2Config", VISION, "image"),
    "data2vec-vision": ("Data2VecVisionForImageClassification", "Data2VecVisionConfig",
                        VISION, "image"),
    "swinv2": ("Swinv2ForImageClassification", "Swinv2Config",
               dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1],
                    num_heads=[2, 4], window_size=4, num_labels=5), "image"),
    "convnextv2": ("ConvNextV2ForImageClassification", "ConvNextV2Config",
                   dict(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, num_labels=5),
                   "image"),
    "resnet": ("ResNetForImageClassification", "ResNetConfig",
               dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                    num_labels=5), "image"),
    "regnet": ("RegNetForImageClassification", "RegNetConfig",
               dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=8,
                    num_labels=5), "image"),
    "mobilevit": ("MobileViTForImageClassification", "MobileViTConfig",
                  dict(image_size=32, hidden_sizes=[16, 24, 32],
                       neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_labels=5),
                  "image"),
    "segformer": ("SegformerForImageClassification", "SegformerConfig",
                  dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                       hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2],
                       num_attention_heads=[1, 2], mlp_ratios=[2, 2], num_labels=5),
                  "image"),
    "levit": ("LevitForImageClassification", "LevitConfig",
              dict(image_size=32, hidden_sizes=[16, 24], num_attention_heads=[2, 3],
                   depths=[1, 1], key_dim=[8, 8], mlp_ratio=[2, 2],
                   attention_ratio=[2, 2], num_labels=5,
                   down_ops=[["Subsample", 8, 2, 2, 2, 2]]), "image"),
    "hubert": ("HubertForCTC", "HubertConfig", None, "ctc"),
    "wavlm": ("WavLMForCTC", "WavLMConfig", None, "ctc"),
    "data2vec-audio": ("Data2VecAudioForCTC", "Data2VecAudioConfig", None, "ctc"),
    "speech2text": ("Speech2TextForConditionalGeneration", "Speech2TextConfig",
                    dict(SEQ2SEQ, input_feat_per_channel=16, input_channels=1,
                         conv_channels=16, max_source_positions=64,
                         max_target_positions=32), "speech"),
    "fnet": ("FNetForSequenceClassification", "FNetConfig", ENCODER, "classify"),
    "xlnet": ("XLNetLMHeadModel", "XLNetConfig",
              dict(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=48,
                   pad_token_id=0, bos_token_id=1, eos_token_id=2), "causal"),
    "funnel": ("FunnelForSequenceClassification", "FunnelConfig",
               dict(vocab_size=VOCAB, block_sizes=[1, 1], num_decoder_layers=1, d_model=32,
                    n_head=4, d_head=8, d_inner=48, num_labels=3), "classify"),
    "mobilebert": ("MobileBertForSequenceClassification", "MobileBertConfig",
                   dict(ENCODER, embedding_size=16, intra_bottleneck_size=16,
                        true_hidden_size=16, num_feedforward_networks=2), "classify"),
    "convbert": ("ConvBertForSequenceClassification", "ConvBertConfig",
                 dict(ENCODER, embedding_size=32), "classify"),
    "squeezebert": ("SqueezeBertForSequenceClassification", "SqueezeBertConfig",
                    dict(ENCODER, embedding_size=32), "classify"),
    "longformer": ("LongformerForSequenceClassification", "LongformerConfig",
                   dict(ENCODER, attention_window=4), "classify"),
    "big-bird": ("BigBirdForSequenceClassification", "BigBirdConfig",
                 dict(ENCODER, attention_type="original_full"), "classify"),
    "ctrl": ("CTRLLMHeadModel", "CTRLConfig", dict(DECODER, dff=48), "causal"),
    "persimmon": ("PersimmonForCausalLM", "PersimmonConfig", DECODER, "causal"),
    "poolformer": ("PoolFormerForImageClassification", "PoolFormerConfig",
                   dict(hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2,
                        patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], num_labels=5),
                   "image"),
    "mobilenet-v2": ("MobileNetV2ForImageClassification", "MobileNetV2Config",
                     dict(image_size=32, depth_multiplier=0.25, num_labels=5), "image"),
    "yolos": ("YolosForObjectDetection", "YolosConfig", dict(VISION, image_size=[32, 32],
                                                              num_detection_tokens=4),
              "logits"),
    "ast": ("ASTForAudioClassification", "ASTConfig",
            dict(VISION, patch_size=4, num_mel_bins=16, max_length=16, frequency_stride=4,
                 time_stride=4), "spectrogram"),
    "mpt": ("MptForCausalLM", "MptConfig", dict(DECODER, d_model=32, n_heads=4, n_layers=2,
                                                  expansion_ratio=2), "causal"),
    "gpt-neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", DECODER, "causal"),
    "blenderbot-small": ("BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig",
                         SEQ2SEQ, "seq2seq"),
}

# models run in float64: their float32 runs part by rounding alone (batch norm over a
# batch of 2 and small feature maps amplifies 1-ulp differences to 1e-4: LeViT's
# gradients, MobileNetV2's eval logits); in float64 they agree to 1e-10
FLOAT64 = {"levit", "mobilenet-v2"}


def inputs(kind, rng):
    """The batch for one kind of model, and the prompt for ``generate`` (or None)."""
    def ids(*shape):
        return torch.tensor(rng.integers(3, VOCAB, shape))

    x = ids(2, 10)
    if kind == "causal":
        return dict(input_ids=x, labels=x), x[:, :4]
    if kind == "classify":
        mask = torch.ones(2, 10, dtype=torch.long)
        mask[1, 7:] = 0
        return dict(input_ids=x, attention_mask=mask, labels=torch.tensor([0, 2])), None
    if kind == "masked":
        labels = torch.full((2, 10), -100)
        labels[:, 3] = x[:, 3]
        return dict(input_ids=x, labels=labels), None
    if kind == "seq2seq":
        return dict(input_ids=x, labels=ids(2, 6)), x
    if kind == "image":
        pixels = torch.tensor(rng.standard_normal((2, 3, 32, 32)), dtype=torch.float32)
        return dict(pixel_values=pixels, labels=torch.tensor([1, 4])), None
    if kind == "speech":
        features = torch.tensor(rng.standard_normal((2, 16, 16)), dtype=torch.float32)
        return dict(input_features=features, labels=ids(2, 5)), features
    if kind == "logits":  # a detection head: its logits without a loss
        pixels = torch.tensor(rng.standard_normal((2, 3, 32, 32)), dtype=torch.float32)
        return dict(pixel_values=pixels), None
    if kind == "spectrogram":
        features = torch.tensor(rng.standard_normal((2, 16, 16)), dtype=torch.float32)
        return dict(input_values=features, labels=torch.tensor([1, 4])), None
    if kind == "ctc":
        audio = torch.tensor(rng.standard_normal((2, 400)), dtype=torch.float32)
        return dict(input_values=audio, labels=ids(2, 6)), None
    raise ValueError(kind)


def run(key, out):
    cls_name, config_name, kwargs, kind = MODELS[key]
    rng = np.random.default_rng(0)
    config = getattr(transformers, config_name)(**(kwargs or MODELS["wav2vec2"][2]))
    batch, prompt = inputs(kind, rng)
    if key in FLOAT64:
        torch.set_default_dtype(torch.float64)
        batch = {k: v.double() if v.is_floating_point() else v for k, v in batch.items()}
    try:
        build_and_run(key, cls_name, config, batch, prompt, out)
    finally:
        torch.set_default_dtype(torch.float32)


def build_and_run(key, cls_name, config, batch, prompt, out):
    """Seeded build, a training-mode forward with the loss and its backward, an
    eval-mode forward and greedy generation; the numbers go into ``out``."""
    torch.manual_seed(0)
    np.random.seed(0)  # the speech models' SpecAugment masks are drawn with NumPy
    model = getattr(transformers, cls_name)(config)
    model.train()
    result = model(**batch)
    loss = result.loss if result.loss is not None else result.logits.square().mean()
    out[f"{key}/loss"] = loss.detach().numpy()
    out[f"{key}/logits"] = result.logits.detach().numpy()
    loss.backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            out[f"{key}/grad/{name}"] = p.grad.numpy().copy()
    model.eval()
    with torch.no_grad():
        out[f"{key}/eval_logits"] = model(**batch).logits.numpy()
    if prompt is not None:
        out[f"{key}/generated"] = model.generate(prompt, max_new_tokens=5,
                                                 do_sample=False).numpy()


if __name__ == "__main__":
    zoo_runner.main(run, MODELS, (torch.__version__, transformers.__version__))
