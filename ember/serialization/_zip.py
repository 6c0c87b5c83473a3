"""Reading checkpoint archives: a zip whose records are checked before any is trusted.

The zip's central directory is parsed by :mod:`zipfile`; everything after that is done
here, on the file itself, so that every entry is validated the same way and storages are
read straight into the arrays that become tensors (no temporary copy):

- every entry sits under the archive's one directory (the one holding ``data.pkl``),
  appears once (readers disagree on which of two same-named entries counts, so ember
  refuses them), is stored or deflated (what torch's reader reads) and not encrypted;
- each entry's local header matches the directory (signature, name, compression), and its
  data lies inside the file, before the directory, overlapping no other entry (so a file
  cannot make one region of bytes count for many storages);
- a stored entry's data is as long as its declared size; a deflated one's declared size is
  one deflate can reach from its compressed size; CRC-32s are checked on every read (not
  under ``mmap=True``, which reads nothing up front).

Every failure is a :class:`CheckpointError` that names the entry.
"""
import os
import queue
import struct
import zipfile
import zlib

import numpy as np

from ember.serialization._format import FORMAT_VERSION, CheckpointError

_STORED, _DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
_CHUNK = 4 << 20  # bytes read (and CRC-checked) at a time
_MAX_DEFLATE_RATIO = 1100  # deflate cannot expand more than ~1032:1
# what zipfile raises on a damaged directory (it has no single error type)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError,
               struct.error, NotImplementedError, UnicodeDecodeError, OverflowError,
               IndexError, KeyError, TypeError)


def _damaged(msg):
    return CheckpointError("checkpoint damaged: " + msg)


class _Archive:
    """Read access to a checkpoint's records, with errors that name the damaged part.

    ``f`` is a path (opened and closed here) or a readable, seekable binary file.
    """

    storage_dir = "data"  # TorchScript archives keep constants' storages in constants/
    max_version = FORMAT_VERSION

    def __init__(self, f):
        self.path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
        self._fh = open(self.path, "rb") if self.path is not None else f
        self._mm = None
        try:
            self._index()
            self._read_metadata()
        except BaseException:
            self.close()
            raise

    # ----- the directory ---------------------------------------------------------------
    def _index(self):
        try:
            zf = zipfile.ZipFile(self._fh)
            infos = zf.infolist()
            self._end = zf.start_dir  # entries' data must end before the directory
            zf.close()  # a file object passed in stays open
        except _ZIP_ERRORS as e:
            raise _damaged(f"its zip directory cannot be read ({type(e).__name__}: {e}); the "
                           "file is truncated or not a checkpoint") from None
        pkl = [i.filename for i in infos
               if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if not pkl:
            raise _damaged("no data.pkl record in the archive")
        top = min(pkl, key=lambda n: n.count("/"))
        self.prefix = top[:-len("data.pkl")]
        self.infos = {}
        for info in infos:
            name = info.filename
            if name in self.infos:
                raise _damaged(f"the archive has two entries named {name!r} (ember refuses "
                               "duplicate names: zip readers disagree on which one counts)")
            if not name.startswith(self.prefix):
                raise _damaged(f"entry {name!r} lies outside the archive's directory "
                               f"{self.prefix!r}")
            if info.compress_type not in (_STORED, _DEFLATED):
                raise _damaged(f"entry {name!r} uses zip compression method "
                               f"{info.compress_type}; checkpoints are stored or deflated")
            if info.flag_bits & 0x1:
                raise _damaged(f"entry {name!r} is encrypted")
            if info.compress_type == _STORED and info.compress_size != info.file_size:
                raise _damaged(f"stored entry {name!r} declares {info.file_size} bytes but "
                               f"holds {info.compress_size}")
            if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024:
                raise _damaged(f"entry {name!r} declares {info.file_size} bytes, more than "
                               f"its {info.compress_size} compressed bytes can hold")
            self.infos[name] = info
        self.names = set(self.infos)
        self._starts = {}
        spans = sorted(((self._local_header(i), i) for i in infos), key=lambda p: p[0])
        for (start, a), (_, b) in zip(spans, spans[1:]):
            if start + a.compress_size > b.header_offset:
                raise _damaged(f"entries {a.filename!r} and {b.filename!r} overlap")

    def _local_header(self, info):
        """Check an entry's local header against the directory; its data's offset."""
        name = info.filename
        head = self._pread(info.header_offset, 30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise _damaged(f"entry {name!r} has no valid local header")
        method, = struct.unpack("<H", head[8:10])
        n, m = struct.unpack("<HH", head[26:30])
        raw = self._pread(info.header_offset + 30, n)
        try:
            local = raw.decode("utf-8" if info.flag_bits & 0x800 else "cp437")
        except UnicodeDecodeError:
            local = None
        if local != info.orig_filename:
            raise _damaged(f"entry {name!r}'s local header names {raw!r}")
        if method != info.compress_type:
            raise _damaged(f"entry {name!r}'s local header says compression {method}, the "
                           f"directory {info.compress_type}")
        start = info.header_offset + 30 + n + m
        if start + info.compress_size > self._end:
            raise _damaged(f"entry {name!r}'s data runs past the end of the archive's "
                           "records (the file is truncated or altered)")
        self._starts[name] = start
        return start

    def _read_metadata(self):
        if self.prefix + "version" in self.names:
            raw = self.read("version").decode("ascii", "replace").strip()
            try:
                version = int(raw)
            except ValueError:
                raise _damaged(f"bad version record {raw!r}") from None
            if version > self.max_version:
                raise CheckpointError(f"checkpoint format version {version} is newer than "
                                      f"this ember reads (versions 1 to {self.max_version})")
        self.byteorder = "<"
        if self.prefix + "byteorder" in self.names:
            order = self.read("byteorder").decode("ascii", "replace")
            if order not in ("little", "big"):
                raise _damaged(f"bad byteorder record {order!r}")
            self.byteorder = "<" if order == "little" else ">"

    @property
    def is_torchscript(self):
        """True for a ``torch.jit.save`` archive (it has a ``constants.pkl``), as torch tells."""
        return self.prefix + "constants.pkl" in self.names

    def close(self):
        """Close the file if this archive opened it (a file object passed in stays open)."""
        if self.path is not None and self._fh is not None:
            self._fh.close()
        self._fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ----- reading bytes ---------------------------------------------------------------
    def _pread(self, offset, n):
        try:
            self._fh.seek(offset)
            return self._fh.read(n)
        except (OSError, ValueError, OverflowError) as e:
            raise _damaged(f"reading {n} bytes at offset {offset} failed ({e})") from None

    def _readinto(self, offset, mv):
        """Fill ``mv`` from the file at ``offset``; the number of bytes read."""
        try:
            self._fh.seek(offset)
            readinto = getattr(self._fh, "readinto", None)
            done = 0
            while done < len(mv):
                if readinto is not None:
                    got = readinto(mv[done:])
                else:
                    data = self._fh.read(len(mv) - done)
                    got = len(data)
                    mv[done:done + got] = data
                if not got:
                    break
                done += got
            return done
        except (OSError, ValueError, OverflowError) as e:
            raise _damaged(f"reading at offset {offset} failed ({e})") from None

    def _info(self, full):
        info = self.infos.get(full)
        if info is None:
            raise _damaged(f"record {full!r} is missing")
        return info

    def _fill(self, info, mv):
        """Read an entry's data into ``mv`` (exactly its declared size), checking its CRC."""
        name = info.filename
        start = self._starts[name]
        crc = 0
        if info.compress_type == _STORED and len(mv) > 2 * _CHUNK:
            crc = self._read_checked(start, mv, name)
        elif info.compress_type == _STORED:
            if self._readinto(start, mv) != len(mv):
                raise _damaged(f"record {name!r} ends early (the file is truncated)")
            crc = zlib.crc32(mv)
        else:
            crc = self._inflate(info, start, mv)
        if crc != info.CRC:
            raise _damaged(f"record {name!r} fails its CRC-32 check (its bytes were altered)")

    def _read_checked(self, start, mv, name):
        """Read a large stored record chunk by chunk while one helper thread checksums
        the chunks already read (both release the GIL): the CRC costs little extra time."""
        import threading
        chunks = queue.SimpleQueue()
        crc = [0]

        def checksum():
            while (part := chunks.get()) is not None:
                crc[0] = zlib.crc32(part, crc[0])

        worker = threading.Thread(target=checksum, name="ember-checkpoint-crc", daemon=True)
        worker.start()
        try:
            for pos in range(0, len(mv), _CHUNK):
                part = mv[pos:pos + _CHUNK]
                if self._readinto(start + pos, part) != len(part):
                    raise _damaged(f"record {name!r} ends early (the file is truncated)")
                chunks.put(part)
        finally:
            chunks.put(None)
            worker.join()
        return crc[0]

    def _inflate(self, info, start, mv):
        name = info.filename
        d = zlib.decompressobj(-15)
        filled, crc, left = 0, 0, info.compress_size
        pos = start
        try:
            while left and not d.eof:
                buf = self._pread(pos, min(_CHUNK, left))
                if not buf:
                    raise _damaged(f"record {name!r} ends early (the file is truncated)")
                pos += len(buf)
                left -= len(buf)
                while buf and not d.eof:
                    out = d.decompress(buf, len(mv) - filled + 1)
                    if filled + len(out) > len(mv):
                        raise _damaged(f"record {name!r} inflates past its declared size of "
                                       f"{len(mv)} bytes")
                    mv[filled:filled + len(out)] = out
                    crc = zlib.crc32(out, crc)
                    filled += len(out)
                    if buf == d.unconsumed_tail and not out:
                        break
                    buf = d.unconsumed_tail
        except zlib.error as e:
            raise _damaged(f"record {name!r} cannot be inflated ({e})") from None
        if not d.eof or filled != len(mv):
            raise _damaged(f"record {name!r} inflates to {filled} bytes, not its declared "
                           f"{len(mv)}")
        return crc

    def read(self, name):
        """The bytes of the record ``name`` (relative to the archive's directory)."""
        info = self._info(self.prefix + name)
        buf = bytearray(info.file_size)
        self._fill(info, memoryview(buf))
        return bytes(buf)

    def read_storage(self, key, dtype, numel, mmap_file=None):
        """The storage ``key`` as a 1-D array of ``numel`` elements of ``dtype``, read
        straight into its final array (or mapped copy-on-write when ``mmap_file``)."""
        name = f"{self.storage_dir}/{key}"
        full = self.prefix + name
        info = self._info(full)
        np_dtype = dtype.np.newbyteorder(self.byteorder)
        nbytes = numel * np_dtype.itemsize
        if info.file_size != nbytes:
            raise _damaged(f"storage {name} has {info.file_size} bytes, expected {nbytes} "
                           f"({numel} x {dtype})")
        if mmap_file:
            return self._mapped(info, np_dtype, dtype, numel)
        arr = np.empty(numel, dtype=dtype.np)
        if nbytes:
            self._fill(info, memoryview(arr.view(np.uint8)))
        if np_dtype != dtype.np:  # a big-endian file: swap in place
            arr.byteswap(inplace=True)
        return arr

    def _mapped(self, info, np_dtype, dtype, numel):
        if info.compress_type != _STORED:
            raise _damaged(f"storage {info.filename!r} is compressed, and mmap=True needs "
                           "stored records; load it without mmap")
        if not numel:
            return np.zeros(0, dtype.np)
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="c")
        start = self._starts[info.filename]
        arr = self._mm[start:start + info.file_size].view(np_dtype)
        return arr if np_dtype == dtype.np else arr.astype(dtype.np)
