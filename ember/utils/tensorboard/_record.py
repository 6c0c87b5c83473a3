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
import contextlib
import itertools
import os
import socket
import struct
import sys
import threading
import time
import weakref

from ember.utils._atomic import io_error, makedirs, plain_words

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


def _tell(err):
    # the one report of a failure that no call was there to raise (met at exit, or by
    # the flush thread of a writer that is then forgotten): one line, no traceback
    sys.stderr.write(f"ember.utils.tensorboard: {err}\n")


def _close_all_at_exit():
    # a short or crashed run (an exception that ends the program) still leaves its events
    for w in list(_open_writers):
        try:
            w.close()   # raises only a failure not raised before
        except OSError as e:
            _tell(e)


atexit.register(_close_all_at_exit)


def _flush_loop(ref, stop, secs):
    # holds the writer only weakly, so that a forgotten writer can still be collected
    while not stop.wait(secs):
        w = ref()
        if w is None:
            return
        # a failure stays on the writer: the next add_*/flush/close in the user's thread
        # raises it, and this thread stops quietly
        broken = not w._drain()
        del w
        if broken:
            return


class EventFileWriter:
    """Appends ``Event`` protobufs to a new ``events.out.tfevents.*`` file in ``logdir``.

    Events wait in memory until ``max_queue`` are pending, ``flush_secs`` have passed (a
    daemon thread), ``flush()``/``close()`` is called, or the interpreter exits.

    A failed write (a full disk, a read-only file system, permission denied) breaks the
    writer: the file may end in a torn record, so nothing more is appended. The failure
    is raised once, as an ``OSError`` that says what happened and names the file, by the
    call that met it or (when the flush thread met it) by the next call in the user's
    thread; later ``add_event``/``flush`` calls raise a short ``OSError`` saying the writer
    is broken, ``close()`` is quiet, and nothing is printed at exit. A failure that no
    call ever raised is printed as one line at exit.
    """

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=""):
        from tensorboard.compat.proto import event_pb2
        self._event_pb2 = event_pb2
        self._logdir = str(logdir)
        self._error = None
        self._reported = False
        self._closed = True   # until the file is open: close() and __del__ do nothing
        makedirs(self._logdir, "cannot create the TensorBoard log directory")
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_uid)}{filename_suffix}")
        self.path = os.path.join(self._logdir, name)
        try:
            # unbuffered: a failed write leaves nothing behind in a buffer to fail again
            self._file = open(self.path, "ab", buffering=0)
        except OSError as e:
            raise io_error(e, self.path, "cannot create the TensorBoard event file") from None
        self._pid = os.getpid()
        self._pending = []
        self._lock = threading.Lock()
        self._max_queue = max(int(max_queue), 1)
        self._closed = False
        self._stop = threading.Event()
        self.add_event(event_pb2.Event(
            wall_time=time.time(), file_version="brain.Event:2",
            source_metadata=event_pb2.SourceMetadata(writer="ember.utils.tensorboard")))
        try:
            self.flush()
        except OSError:
            # not even the header fits: leave no empty event file behind
            self._closed = True
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        if flush_secs and flush_secs > 0:
            t = threading.Thread(target=_flush_loop, args=(weakref.ref(self), self._stop,
                                                            float(flush_secs)),
                                 name="ember-tensorboard-flush", daemon=True)
            t.start()
        _open_writers.add(self)

    def get_logdir(self):
        """The directory this writer writes to."""
        return self._logdir

    def _raise_broken(self):
        err = self._error
        if not self._reported:
            self._reported = True
            raise err
        raise type(err)(err.errno, "this TensorBoard writer is broken: an earlier write "
                        f"failed ({self._cause}); close it and open a new one",
                        err.filename)

    def add_event(self, event):
        """Queue one ``Event`` (its record is built now, so later changes do not matter)."""
        if self._error is not None:
            self._raise_broken()
        if self._closed:
            raise RuntimeError(f"the event file {self.path} is closed")
        record = frame(event.SerializeToString())
        with self._lock:
            self._pending.append(record)
            full = len(self._pending) >= self._max_queue
        if full:
            self.flush()

    def _write(self, data):
        view = memoryview(data)
        while view:
            n = self._file.write(view)
            view = view[n:]

    def flush(self):
        """Write every queued record to the file and hand it to the OS."""
        if not self._drain():
            self._raise_broken()

    def _drain(self):
        """Write the queue; False (the error kept on the writer, not raised) on failure."""
        if os.getpid() != self._pid:
            # a forked child (a DataLoader worker) holds a copy of the queue: only the
            # process that opened the file writes it, or events would be doubled
            self._pending = []
            return True
        with self._lock:
            if self._error is None and self._pending and not self._file.closed:
                data, self._pending = b"".join(self._pending), []
                try:
                    self._write(data)
                except OSError as e:
                    self._cause = plain_words(e)
                    self._error = io_error(
                        e, self.path, "cannot write the TensorBoard event file",
                        f"{len(data)} bytes of events were lost, and this writer writes "
                        "no more")
                    self._stop.set()
        return self._error is None

    def close(self):
        """Flush and close the file; later ``add_event`` calls raise."""
        if self._closed:
            return
        try:
            # a failure already raised to the user is not raised again
            if self._error is None or not self._reported:
                self.flush()
        finally:
            self._closed = True
            self._stop.set()
            with self._lock, contextlib.suppress(OSError):
                self._file.close()
            _open_writers.discard(self)

    def __del__(self):
        try:
            self.close()
        except OSError as e:
            _tell(e)
        except Exception:
            pass
