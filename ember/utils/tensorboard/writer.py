"""``SummaryWriter``: PyTorch's TensorBoard logger, writing TensorBoard's own event files.

Every ``add_*`` method turns its values into NumPy arrays at once (detached from any
graph), builds a ``Summary`` with the ``tensorboard`` package's protobuf classes and
queues it as an ``Event``; the event file is flushed every ``flush_secs``, after
``max_queue`` pending events, on ``flush()``/``close()`` and at interpreter exit.
"""
import os
import time

from ember.utils._atomic import makedirs
from ember.utils.tensorboard import _embedding, summary
from ember.utils.tensorboard._lazy import pb
from ember.utils.tensorboard._record import EventFileWriter

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """Writes ``Event`` and ``Summary`` protobufs to one event file in ``log_dir``."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs,
                                            filename_suffix)

    def get_logdir(self):
        """The directory of the event file."""
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        """Stamp ``event`` with the wall time (and step) and queue it."""
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary_pb, global_step=None, walltime=None):
        """Queue a ``Summary`` as an event."""
        self.add_event(pb().event.Event(summary=summary_pb), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None):
        """Queue a (GraphDef, RunMetadata) pair as PyTorch does: the graph, then step stats."""
        graph_def, stepstats = graph_profile
        ev = pb().event
        self.add_event(ev.Event(graph_def=graph_def.SerializeToString()), None, walltime)
        trm = ev.TaggedRunMetadata(tag="step1", run_metadata=stepstats.SerializeToString())
        self.add_event(ev.Event(tagged_run_metadata=trm), None, walltime)

    def flush(self):
        """Write pending events to disk."""
        self.event_writer.flush()

    def close(self):
        """Flush and close the event file."""
        self.event_writer.close()


class SummaryWriter:
    """Log scalars, histograms, images, text, graphs, hyperparameters and embeddings for
    TensorBoard, with PyTorch's arguments and defaults.

    >>> with SummaryWriter("runs/exp1") as w:      # doctest: +SKIP
    ...     for step in range(100):
    ...         w.add_scalar("loss", 1.0 / (step + 1), step)

    Without ``log_dir`` the run goes to ``runs/<Mon01_12-00-00>_<host><comment>``.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if not log_dir:
            import socket
            from datetime import datetime
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        self.default_bins = summary.default_bins()

    def _get_file_writer(self):
        """The run's FileWriter, created again after ``close()``."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                # TensorBoard hides events at or after this step from earlier files
                ev = pb().event
                step = self.purge_step
                self.file_writer.add_event(ev.Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(ev.Event(
                    step=step, session_log=ev.SessionLog(status=ev.SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        """The directory where event files are written."""
        return self.log_dir

    def _add(self, summary_pb, global_step, walltime):
        self._get_file_writer().add_summary(summary_pb, global_step, walltime)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Log one scalar (a number or one-element Tensor, read with ``.item()`` now)."""
        self._add(summary.scalar(tag, scalar_value, new_style=new_style,
                                 double_precision=double_precision), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Log several scalars on one chart: each goes to its own sub-run
        ``<log_dir>/<main_tag>_<tag>`` under the tag ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            key = base + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = self.all_writers.get(key)
            if fw is None:
                fw = self.all_writers[key] = FileWriter(key, self.max_queue, self.flush_secs,
                                                        self.filename_suffix)
            fw.add_summary(summary.scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        """Log a whole tensor (TensorBoard's tensor plugin)."""
        self._add(summary.tensor_proto(tag, tensor), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """Log the histogram of ``values``; ``bins`` is 'tensorflow' (TensorFlow's
        exponential buckets), any ``numpy.histogram`` rule ('auto', 'fd'...), a count or
        an array of edges."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        elif not isinstance(bins, (str, int)):
            bins = summary.make_np(bins)
        self._add(summary.histogram(tag, values, bins, max_bins=max_bins), global_step,
                  walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits,
                          bucket_counts, global_step=None, walltime=None):
        """Log a histogram from its statistics and buckets (upper limit per bucket)."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        self._add(summary.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits,
                                        bucket_counts), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Log one image: uint8 in [0, 255] or float in [0, 1], laid out as ``dataformats``
        (CHW, HWC, HW...)."""
        self._add(summary.image(tag, img_tensor, dataformats=dataformats), global_step,
                  walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW"):
        """Log a batch of images tiled into one grid (NCHW, NHWC...)."""
        self._add(summary.image(tag, img_tensor, dataformats=dataformats), global_step,
                  walltime)

    def add_image_with_boxes(self, tag, img_tensor, box_tensor, global_step=None,
                             walltime=None, rescale=1, dataformats="CHW", labels=None):
        """Log an image with boxes (N, 4) as (xmin, ymin, xmax, ymax) drawn in red."""
        if rescale != 1:
            raise NotImplementedError("add_image_with_boxes: rescale other than 1")
        if labels is not None and len(labels) != len(summary.make_np(box_tensor)):
            labels = None
        self._add(summary.image_boxes(tag, img_tensor, box_tensor, dataformats, labels),
                  global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """Render a matplotlib figure (or a list of them) and log it as an image."""
        fmt = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, summary.figure_to_image(figure, close), global_step, walltime,
                       dataformats=fmt)

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None):
        """Not implemented in ember (PyTorch needs moviepy to encode the GIF)."""
        raise NotImplementedError("SummaryWriter.add_video is not implemented in ember")

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Log a mono clip of samples in [-1, 1] as WAV."""
        self._add(summary.audio(tag, snd_tensor, sample_rate), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Log markdown text (shown under ``<tag>/text_summary``)."""
        self._add(summary.text(tag, text_string), global_step, walltime)

    def add_onnx_graph(self, prototxt):
        """Not implemented in ember."""
        raise NotImplementedError("SummaryWriter.add_onnx_graph is not implemented in ember")

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Log the model's graph: one node per op in the scope of the module that ran it
        (``Net/Linear[fc1]/...``), with parameters, inputs and outputs and their shapes."""
        from ember.utils.tensorboard._graph import graph
        self._get_file_writer().add_graph(graph(model, input_to_model, verbose))

    @staticmethod
    def _encode(rawstr):
        return rawstr.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None):
        """Write an embedding for TensorBoard's projector: ``<log_dir>/<step>/<tag>/``
        holds tensors.tsv, metadata.tsv and sprite.png, and ``projector_config.pbtxt``
        lists every embedding of this writer."""
        from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig
        mat = summary.make_np(mat)
        if global_step is None:
            global_step = 0
        subdir = f"{str(global_step).zfill(5)}/{self._encode(tag)}"
        logdir = self._get_file_writer().get_logdir()
        save_path = os.path.join(logdir, subdir)
        if os.path.exists(save_path) and not os.path.isdir(save_path):
            raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. "
                                     "Cannot proceed.")
        makedirs(save_path, "cannot create the embedding folder")
        if mat.ndim != 2:
            raise AssertionError("mat should be 2D, where mat.size(0) is the number of data "
                                 "points")
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            _embedding.write_tsv(metadata, save_path, metadata_header)
        if label_img is not None:
            if mat.shape[0] != summary.make_np(label_img).shape[0]:
                raise AssertionError("#images should equal with #data points")
            _embedding.write_sprite(label_img, save_path)
        _embedding.write_mat(mat, save_path)
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend([_embedding.embedding_info(
            metadata, label_img, subdir, global_step, tag)])
        _embedding.write_config(logdir, self._projector_config)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """Log a precision-recall curve of ``predictions`` in [0, 1] against 0/1 labels."""
        self._add(summary.pr_curve(tag, labels, predictions, num_thresholds, weights),
                  global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        """Log a precision-recall curve given by its counts, precision and recall."""
        self._add(summary.pr_curve_raw(tag, true_positive_counts, false_positive_counts,
                                       true_negative_counts, false_negative_counts,
                                       precision, recall, num_thresholds),
                  global_step, walltime)

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        """A custom chart drawing several scalar tags as lines."""
        self._add(summary.custom_scalars({category: {title: ["Multiline", tags]}}), None, None)

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        """A custom chart of a value with its lower and upper margin (three tags)."""
        if len(tags) != 3:
            raise AssertionError(f"Expected 3 tags, got {len(tags)}.")
        self._add(summary.custom_scalars({category: {title: ["Margin", tags]}}), None, None)

    def add_custom_scalars(self, layout):
        """Custom charts: ``{category: {chart: ["Multiline" | "Margin", [tags]]}}``."""
        self._add(summary.custom_scalars(layout), None, None)

    def add_mesh(self, tag, vertices, colors=None, faces=None, config_dict=None,
                 global_step=None, walltime=None):
        """Log a mesh or point cloud: vertices (B, N, 3), optional colors and faces."""
        self._add(summary.mesh(tag, vertices, colors, faces, config_dict), global_step,
                  walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None,
                    run_name=None, global_step=None):
        """Log hyperparameters and their metrics for the HParams dashboard, in a run
        folder of their own, ``<log_dir>/<run_name or time>``, as PyTorch does."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = summary.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        logdir = os.path.join(self._get_file_writer().get_logdir(),
                              run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w:
            for s in (exp, ssi, sei):
                w.file_writer.add_summary(s, global_step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def flush(self):
        """Write every pending event of this writer (and its sub-runs) to disk."""
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()

    def close(self):
        """Flush and close the event files; a later ``add_*`` opens a new file."""
        if self.all_writers is None:
            return
        first = None
        for w in self.all_writers.values():
            try:
                w.close()
            except OSError as e:   # close the others too, then raise the first failure
                first = first or e
        self.file_writer = self.all_writers = None
        if first is not None:
            raise first

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            self.close()
        except OSError as e:
            if exc_val is None:
                raise
            # an exception is already on its way: one traceback, the failure as its note
            note = f"while closing the TensorBoard writer: {e}"
            if hasattr(exc_val, "add_note"):
                exc_val.add_note(note)
            else:   # Python 3.10
                import sys
                sys.stderr.write(f"ember.utils.tensorboard: {note}\n")
