"""TensorBoard event files: TFRecord framing and a writer that flushes on time, on size,
on ``close()`` and at interpreter exit.

A TFRecord is ``length (uint64 LE) | masked_crc32c(length) | data | masked_crc32c(data)``;
the CRC is CRC-32C (Castagnoli), masked as TensorFlow does so that a CRC of data that
itself holds CRCs does not degenerate. Each record's data is one serialized ``Event``.

The event file is a stream that grows while training runs, so it is appended to (and
flushed to the OS) rather than replaced atomically: a killed process leaves every record
that was flushed, and a reader stops cleanly at a torn last record.
"""
import atexit
import itertools
import os
import socket
import struct
import threading
import time
import weakref

__all__ = ["masked_crc32c", "frame", "EventFileWriter"]


def _crc32c_table():
    poly = 0x82F63B78  # CRC-32C (Castagnoli), reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C of ``data`` (bytes)."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    """TFRecord's masked CRC: rotate right by 15 bits and add a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    """One TFRecord holding ``data`` (bytes)."""
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


_uid = itertools.count()
_open_writers = weakref.WeakSet()


def _close_all_at_exit():
    # a short or crashed run (an exception that ends the program) still leaves its events
    for w in list(_open_writers):
        w.close()


atexit.register(_close_all_at_exit)


def _flush_loop(ref, stop, secs):
    # holds the writer only weakly, so that a forgotten writer can still be collected
    while not stop.wait(secs):
        w = ref()
        if w is None:
            return
        w.flush()
        del w


class EventFileWriter:
    """Appends ``Event`` protobufs to a new ``events.out.tfevents.*`` file in ``logdir``.

    Events wait in memory until ``max_queue`` are pending, ``flush_secs`` have passed (a
    daemon thread), ``flush()``/``close()`` is called, or the interpreter exits.
    """

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=""):
        from tensorboard.compat.proto import event_pb2
        self._event_pb2 = event_pb2
        self._logdir = str(logdir)
        os.makedirs(self._logdir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_uid)}{filename_suffix}")
        self.path = os.path.join(self._logdir, name)
        self._file = open(self.path, "ab")
        self._pid = os.getpid()
        self._pending = []
        self._lock = threading.Lock()
        self._max_queue = max(int(max_queue), 1)
        self._closed = False
        self.add_event(event_pb2.Event(
            wall_time=time.time(), file_version="brain.Event:2",
            source_metadata=event_pb2.SourceMetadata(writer="ember.utils.tensorboard")))
        self.flush()
        self._stop = threading.Event()
        if flush_secs and flush_secs > 0:
            t = threading.Thread(target=_flush_loop, args=(weakref.ref(self), self._stop,
                                                            float(flush_secs)),
                                 name="ember-tensorboard-flush", daemon=True)
            t.start()
        _open_writers.add(self)

    def get_logdir(self):
        """The directory this writer writes to."""
        return self._logdir

    def add_event(self, event):
        """Queue one ``Event`` (its record is built now, so later changes do not matter)."""
        if self._closed:
            raise RuntimeError(f"the event file {self.path} is closed")
        record = frame(event.SerializeToString())
        with self._lock:
            self._pending.append(record)
            full = len(self._pending) >= self._max_queue
        if full:
            self.flush()

    def flush(self):
        """Write every queued record to the file and hand it to the OS."""
        if os.getpid() != self._pid:
            # a forked child (a DataLoader worker) holds a copy of the queue: only the
            # process that opened the file writes it, or events would be doubled
            self._pending = []
            return
        with self._lock:
            if self._closed and self._file.closed:
                return
            if self._pending:
                self._file.write(b"".join(self._pending))
                self._pending = []
            self._file.flush()

    def close(self):
        """Flush and close the file; later ``add_event`` calls raise."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._stop.set()
        with self._lock:
            self._file.close()
        _open_writers.discard(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
