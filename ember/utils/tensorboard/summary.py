"""Builders of TensorBoard ``Summary`` protobufs from arrays (the messages are the
``tensorboard`` package's generated classes; nothing here encodes protobuf by hand).

Every value is first turned into a NumPy array by :func:`make_np`, which reads a
Tensor's data detached from its graph, so a logged value never keeps a graph alive.
"""
import io
import json

import numpy as np

from ember.utils.tensorboard._lazy import pb

__all__ = ["make_np", "scalar", "tensor_proto", "histogram", "histogram_raw", "make_histogram",
           "image", "convert_to_HWC", "make_grid", "text", "audio", "hparams", "pr_curve",
           "pr_curve_raw", "compute_curve", "custom_scalars", "mesh", "figure_to_image"]


def make_np(x):
    """A NumPy array holding ``x`` (an ember Tensor, array, number or list), off the graph."""
    from ember import _tensor
    if isinstance(x, _tensor.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x) or isinstance(x, (list, tuple)):
        return np.asarray(x)
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a tensor of another library
        return x.detach().cpu().numpy()
    raise NotImplementedError(f"cannot log a value of type {type(x).__name__}: pass an ember "
                              "Tensor, a NumPy array or a Python number")


def _plugin_metadata(name, content=b""):
    s = pb().summary
    return s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name=name,
                                                                      content=content))


def _shape(dims):
    ts = pb().tensor_shape
    return ts.TensorShapeProto(dim=[ts.TensorShapeProto.Dim(size=int(d)) for d in dims])


def scalar(name, value, new_style=False, double_precision=False):
    """A Summary with one scalar (``simple_value``, or a tensor with ``new_style``)."""
    s = pb().summary
    arr = make_np(value).squeeze()
    if arr.ndim != 0:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given "
                             f"size: {arr.size} and {arr.ndim} dimensions.")
    v = float(arr)
    if not new_style:
        return s.Summary(value=[s.Summary.Value(tag=name, simple_value=v)])
    tp = pb().tensor
    if double_precision:
        t = tp.TensorProto(double_val=[v], dtype="DT_DOUBLE")
    else:
        t = tp.TensorProto(float_val=[v], dtype="DT_FLOAT")
    return s.Summary(value=[s.Summary.Value(tag=name, tensor=t,
                                            metadata=_plugin_metadata("scalars"))])


# numpy dtype -> (TensorProto dtype, value field)
_TENSOR_FIELDS = {
    "float16": ("DT_HALF", "half_val"), "float32": ("DT_FLOAT", "float_val"),
    "float64": ("DT_DOUBLE", "double_val"), "int8": ("DT_INT8", "int_val"),
    "uint8": ("DT_UINT8", "int_val"), "int16": ("DT_INT16", "int_val"),
    "int32": ("DT_INT32", "int_val"), "int64": ("DT_INT64", "int64_val"),
    "bool": ("DT_BOOL", "bool_val"), "complex64": ("DT_COMPLEX64", "scomplex_val"),
    "complex128": ("DT_COMPLEX128", "dcomplex_val"),
}


def tensor_proto(tag, value):
    """A Summary holding a whole tensor (TensorBoard's "tensor" plugin)."""
    arr = make_np(value)
    if arr.nbytes >= 1 << 31:
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    name = arr.dtype.name
    if name not in _TENSOR_FIELDS:
        raise ValueError(f"{tag} has unsupported tensor dtype {name}")
    dtype, field = _TENSOR_FIELDS[name]
    flat = arr.reshape(-1)
    if field == "half_val":
        vals = flat.view(np.uint16).tolist()
    elif field in ("scomplex_val", "dcomplex_val"):
        vals = np.stack([flat.real, flat.imag], -1).reshape(-1).tolist()
    else:
        vals = flat.tolist()
    t = pb().tensor.TensorProto(dtype=dtype, tensor_shape=_shape(arr.shape), **{field: vals})
    s = pb().summary
    return s.Summary(value=[s.Summary.Value(tag=tag, tensor=t,
                                            metadata=_plugin_metadata("tensor"))])


def default_bins():
    """TensorFlow's histogram bucket limits: +-1e-12 growing by 10% up to 1e20, and 0."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-x for x in reversed(pos)] + [0] + pos


def histogram_raw(name, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):
    """A Summary with a histogram given by its statistics and buckets."""
    s = pb().summary
    h = s.HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                         bucket_limit=list(make_np(bucket_limits).reshape(-1).tolist()),
                         bucket=list(make_np(bucket_counts).reshape(-1).tolist()))
    return s.Summary(value=[s.Summary.Value(tag=name, histo=h)])


def histogram(name, values, bins, max_bins=None):
    """A Summary with the histogram of ``values`` (``bins`` as ``numpy.histogram`` takes)."""
    s = pb().summary
    h = make_histogram(make_np(values).astype(float), bins, max_bins)
    return s.Summary(value=[s.Summary.Value(tag=name, histo=h)])


def make_histogram(values, bins, max_bins=None):
    """A ``HistogramProto``: TensorBoard keeps right bucket edges only, so the buckets
    are trimmed to the occupied range with one empty bucket on the left."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    n = len(counts)
    if max_bins is not None and n > max_bins:
        step = n // max_bins
        if n % step:
            counts = np.pad(counts, (0, step - n % step))
        counts = counts.reshape(-1, step).sum(axis=-1)
        limits = np.concatenate([limits[:-1:step], limits[-1:]])
    occupied = np.cumsum(counts > 0)
    start, end = np.searchsorted(occupied, [0, occupied[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    if counts.size == 0 or limits.size == 0:
        raise ValueError("The histogram is empty: the values are not finite")
    return pb().summary.HistogramProto(
        min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
        sum_squares=values.dot(values), bucket_limit=limits.tolist(), bucket=counts.tolist())


def make_grid(imgs, ncols=8):
    """N images (N,C,H,W with C 1 or 3) tiled into one (3,H*rows,W*cols) image."""
    if imgs.shape[1] == 1:
        imgs = np.concatenate([imgs] * 3, 1)
    if imgs.ndim != 4 or imgs.shape[1] != 3:
        raise AssertionError("Input should be a 4D numpy array with 3 channels")
    n, _, h, w = imgs.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=imgs.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = imgs[i]
    return canvas


def convert_to_HWC(arr, dataformats):
    """An (H, W, C) image from ``arr`` laid out as ``dataformats`` (NCHW, CHW, HWC, HW...)."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt):
        raise AssertionError(f"You can not use the same dimension shorthand twice. "
                             f"input_format: {dataformats}")
    if arr.ndim != len(fmt):
        raise AssertionError(f"size of input tensor and input format are different. tensor "
                             f"shape: {arr.shape}, input_format: {dataformats}")
    if len(fmt) == 4:
        return make_grid(arr.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = arr.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    if len(fmt) == 2:
        return np.stack([arr.transpose([fmt.find(c) for c in "HW"])] * 3, 2)
    raise AssertionError(f"unsupported dataformats {dataformats!r}")


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("images in TensorBoard need Pillow: pip install -e '.[tensorboard]'") \
            from None
    return Image


def _to_uint8(hwc):
    # uint8 images are taken as they are; any other dtype is read as [0, 1]
    scale = 1 if hwc.dtype == np.uint8 else 255
    return (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def make_image(hwc, rescale=1):
    """A ``Summary.Image`` (PNG) from an (H, W, C) uint8 array."""
    Image = _pil()
    h, w, c = hwc.shape
    img = Image.fromarray(hwc)
    img = img.resize((int(w * rescale), int(h * rescale)), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return pb().summary.Summary.Image(height=h, width=w, colorspace=c,
                                      encoded_image_string=buf.getvalue())


def image(tag, value, rescale=1, dataformats="NCHW"):
    """A Summary with one image (a batch is tiled into a grid)."""
    hwc = _to_uint8(convert_to_HWC(make_np(value), dataformats))
    s = pb().summary
    return s.Summary(value=[s.Summary.Value(tag=tag, image=make_image(hwc, rescale))])


def image_boxes(tag, value, boxes, dataformats="CHW", labels=None):
    """A Summary with one image and red boxes (xmin, ymin, xmax, ymax) drawn on it."""
    from PIL import ImageDraw
    Image = _pil()
    hwc = _to_uint8(convert_to_HWC(make_np(value), dataformats))
    img = Image.fromarray(hwc)
    draw = ImageDraw.Draw(img)
    for i, (x0, y0, x1, y1) in enumerate(make_np(boxes).tolist()):
        draw.rectangle([x0, y0, x1, y1], outline="red", width=2)
        if labels is not None:
            draw.text((x0 + 2, y0 + 2), str(labels[i]), fill="red")
    s = pb().summary
    return s.Summary(value=[s.Summary.Value(tag=tag, image=make_image(np.asarray(img)))])


def figure_to_image(figures, close=True):
    """Render matplotlib figure(s) to a CHW (or NCHW for a list) uint8 array."""
    try:
        import matplotlib.pyplot as plt
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ImportError("add_figure needs matplotlib: pip install matplotlib") from None

    def render(fig):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        w, h = fig.canvas.get_width_height()
        rgb = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(h, w, 4)[:, :, :3]
        if close:
            plt.close(fig)
        return np.moveaxis(rgb, 2, 0)

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)


def text(tag, text_string):
    """A Summary with one markdown text (TensorBoard's "text" plugin)."""
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
    t = pb().tensor.TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf_8")],
                                tensor_shape=_shape([1]))
    s = pb().summary
    md = _plugin_metadata("text", TextPluginData(version=0).SerializeToString())
    return s.Summary(value=[s.Summary.Value(tag=tag + "/text_summary", metadata=md, tensor=t)])


def audio(tag, value, sample_rate=44100):
    """A Summary with a mono WAV clip from samples in [-1, 1] (clipped)."""
    import wave
    arr = make_np(value).squeeze()
    if arr.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    pcm = (arr.clip(-1, 1) * np.iinfo(np.int16).max).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(sample_rate)
        f.writeframes(pcm.tobytes())
    s = pb().summary
    a = s.Summary.Audio(sample_rate=sample_rate, num_channels=1, length_frames=pcm.shape[-1],
                        encoded_audio_string=buf.getvalue(), content_type="audio/wav")
    return s.Summary(value=[s.Summary.Value(tag=tag, audio=a)])


def _hparam_value(k, v, ssi, discrete, api):
    from google.protobuf import struct_pb2
    # as PyTorch: a bool is an int in Python, so True is logged as the number 1.0
    if isinstance(v, (int, float)):
        kind, field = "DATA_TYPE_FLOAT64", "number_value"
    elif isinstance(v, str):
        kind, field = "DATA_TYPE_STRING", "string_value"
    elif hasattr(v, "shape"):
        v = float(make_np(v).reshape(-1)[0])
        kind, field = "DATA_TYPE_FLOAT64", "number_value"
    else:
        raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
    setattr(ssi.hparams[k], field, v)
    domain = None
    if k in discrete:
        domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d})
                                              for d in discrete[k]])
    return api.HParamInfo(name=k, type=api.DataType.Value(kind), domain_discrete=domain)


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The three Summaries of the hparams plugin: experiment, session start, session end."""
    from tensorboard.plugins.hparams import api_pb2 as api
    from tensorboard.plugins.hparams import metadata as hmeta
    from tensorboard.plugins.hparams import plugin_data_pb2 as hpd
    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError("hparam_dict and metric_dict should be dictionary.")
    discrete = hparam_domain_discrete or {}
    if not isinstance(discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, "
                        "nothing logged.")
    for k, v in discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or \
                not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same "
                            f"type as hparam_dict[{k}].")
    ssi = hpd.SessionStartInfo()
    infos = [_hparam_value(k, v, ssi, discrete, api) for k, v in hparam_dict.items()
             if v is not None]
    exp = api.Experiment(hparam_infos=infos,
                         metric_infos=[api.MetricInfo(name=api.MetricName(tag=k))
                                       for k in metric_dict])
    sei = hpd.SessionEndInfo(status=api.Status.Value("STATUS_SUCCESS"))
    s = pb().summary
    out = []
    for tag, field, msg in ((hmeta.EXPERIMENT_TAG, "experiment", exp),
                            (hmeta.SESSION_START_INFO_TAG, "session_start_info", ssi),
                            (hmeta.SESSION_END_INFO_TAG, "session_end_info", sei)):
        content = hpd.HParamsPluginData(version=hmeta.PLUGIN_DATA_VERSION, **{field: msg})
        md = _plugin_metadata(hmeta.PLUGIN_NAME, content.SerializeToString())
        out.append(s.Summary(value=[s.Summary.Value(tag=tag, metadata=md)]))
    return tuple(out)


def _pr_summary(tag, data, num_thresholds):
    from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    t = pb().tensor.TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(),
                                tensor_shape=_shape(data.shape))
    s = pb().summary
    return s.Summary(value=[s.Summary.Value(tag=tag, metadata=_plugin_metadata(
        "pr_curves", content), tensor=t)])


def compute_curve(labels, predictions, num_thresholds, weights=None):
    """(tp, fp, tn, fn, precision, recall) at ``num_thresholds`` evenly spaced thresholds."""
    w = 1.0 if weights is None else weights
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    lab = labels.astype(np.float64)
    rng = (0, num_thresholds - 1)
    tp_b, _ = np.histogram(buckets, bins=num_thresholds, range=rng, weights=lab * w)
    fp_b, _ = np.histogram(buckets, bins=num_thresholds, range=rng, weights=(1.0 - lab) * w)
    tp = np.cumsum(tp_b[::-1])[::-1]
    fp = np.cumsum(fp_b[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    """A Summary with a precision-recall curve (at most 127 thresholds, as PyTorch)."""
    n = min(num_thresholds, 127)
    w = None if weights is None else make_np(weights)
    return _pr_summary(tag, compute_curve(make_np(labels), make_np(predictions), n, w), n)


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127):
    """A Summary with a precision-recall curve given by its counts."""
    data = np.stack([make_np(a) for a in (tp, fp, tn, fn, precision, recall)])
    return _pr_summary(tag, data, min(num_thresholds, 127))


def custom_scalars(layout):
    """The custom_scalars plugin's layout: {category: {chart: ["Multiline"|"Margin", tags]}}."""
    from tensorboard.plugins.custom_scalar import layout_pb2 as lp
    categories = []
    for cat, charts in layout.items():
        out = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise AssertionError("len(tags) != 3")
                series = lp.MarginChartContent.Series(value=tags[0], lower=tags[1],
                                                      upper=tags[2])
                out.append(lp.Chart(title=title, margin=lp.MarginChartContent(series=[series])))
            else:
                out.append(lp.Chart(title=title, multiline=lp.MultilineChartContent(tag=tags)))
        categories.append(lp.Category(title=cat, chart=out))
    t = pb().tensor.TensorProto(dtype="DT_STRING", tensor_shape=_shape([]), string_val=[
        lp.Layout(category=categories).SerializeToString()])
    s = pb().summary
    return s.Summary(value=[s.Summary.Value(tag="custom_scalars__config__", tensor=t,
                                            metadata=_plugin_metadata("custom_scalars"))])


def mesh(tag, vertices, colors, faces, config_dict=None, display_name=None, description=None):
    """The mesh plugin's Summary: vertices, faces and colors, each (B, N, 3)."""
    from tensorboard.plugins.mesh import metadata as mm
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData
    cfg = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    parts = [(make_np(a), kind) for a, kind in ((vertices, MeshPluginData.VERTEX),
                                                 (faces, MeshPluginData.FACE),
                                                 (colors, MeshPluginData.COLOR))
             if a is not None]
    components = mm.get_components_bitmask([k for _, k in parts])
    s = pb().summary
    values = []
    for arr, kind in parts:
        md = mm.create_summary_metadata(tag, display_name, kind, components, arr.shape,
                                        description, json_config=cfg)
        t = pb().tensor.TensorProto(dtype="DT_FLOAT", tensor_shape=_shape(arr.shape[:3]),
                                    float_val=arr.reshape(-1).tolist())
        values.append(s.Summary.Value(tag=mm.get_instance_name(tag, kind), tensor=t,
                                      metadata=md))
    return s.Summary(value=values)
