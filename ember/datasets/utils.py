"""Downloading and checking dataset files, as ``torchvision.datasets.utils``.

Every download goes to a temporary file beside its target first (through
``ember.utils._atomic.atomic_write``); a file whose MD5 does not match is deleted, never
renamed into place, so a corrupted or truncated download is never read as data.
"""
import gzip
import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile

from ember.utils._atomic import atomic_write, io_error, makedirs

__all__ = ["calculate_md5", "check_md5", "check_integrity", "download_url", "extract_archive",
           "download_and_extract_archive", "download_from_mirrors", "ChecksumError"]

_USER_AGENT = "ember-datasets"
_CHUNK = 1 << 20


class ChecksumError(RuntimeError):
    """A downloaded file's MD5 did not match the expected one (the file was deleted)."""


def calculate_md5(fpath, chunk_size=_CHUNK):
    """The MD5 hex digest of the file at ``fpath``, read in chunks."""
    md5 = hashlib.md5(usedforsecurity=False)
    with open(fpath, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            md5.update(chunk)
    return md5.hexdigest()


def check_md5(fpath, md5, **kwargs):
    """True when the file at ``fpath`` has the MD5 hex digest ``md5``."""
    return md5.lower() == calculate_md5(fpath, **kwargs)


def check_integrity(fpath, md5=None):
    """True when ``fpath`` is a file and, if ``md5`` is given, its MD5 matches."""
    if not os.path.isfile(fpath):
        return False
    if md5 is None:
        return True
    return check_md5(fpath, md5)


def _urlretrieve(url, dest, timeout, md5):
    """Stream ``url`` into ``dest``; it replaces ``dest`` only if complete and its MD5 matches."""
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    digest = hashlib.md5(usedforsecurity=False)
    with urllib.request.urlopen(request, timeout=timeout) as response, \
            atomic_write(dest, "wb") as fh:
        for chunk in iter(lambda: response.read(_CHUNK), b""):
            digest.update(chunk)
            fh.write(chunk)
        got = digest.hexdigest()
        if md5 is not None and got != md5.lower():
            raise ChecksumError(f"{url}: checksum mismatch: the downloaded file's MD5 is {got}, "
                                f"expected {md5}; the corrupted file was deleted")


def download_url(url, root, filename=None, md5=None, max_redirect_hops=3, *, timeout=60.0):
    """Download ``url`` into ``root/filename`` and check its MD5.

    Args:
        url (str): where to download from (``http``, ``https`` or ``file``).
        root (str): the directory to put the file in (created if missing).
        filename (str, optional): the name to save it under; default: the URL's basename.
        md5 (str, optional): the expected MD5 hex digest; if given and the downloaded
            file does not match, the file is deleted and ``ChecksumError`` (a
            ``RuntimeError``) is raised.
        max_redirect_hops (int): accepted for torchvision compatibility; urllib follows
            redirects itself.
        timeout (float): seconds to wait for the server before giving up.

    A file already present with the right MD5 is not downloaded again. Network errors
    propagate as ``urllib.error.URLError`` (an ``OSError``).
    """
    root = os.path.expanduser(os.fspath(root))
    if not filename:
        filename = os.path.basename(url.rstrip("/"))
    fpath = os.path.join(root, filename)
    makedirs(root, "cannot create the download folder")
    if check_integrity(fpath, md5):
        return fpath
    _urlretrieve(url, fpath, timeout, md5)
    return fpath


def extract_archive(from_path, to_path=None, remove_finished=False):
    """Extract a ``.gz`` file (one file), or a ``.tar``/``.tar.gz``/``.tgz``/``.zip`` archive.

    Returns the directory extracted into. Anything else raises ``NotImplementedError``.
    """
    from_path = os.fspath(from_path)
    if to_path is None:
        to_path = os.path.dirname(from_path)
    name = os.path.basename(from_path)
    try:
        _extract(from_path, to_path, name)
    except OSError as e:
        if e.errno is None or e.filename == from_path:
            raise
        # a full disk or a read-only folder while unpacking: say so once, naming the file
        raise io_error(e, e.filename if e.filename is not None else to_path,
                       f"cannot extract {name}") from None
    if remove_finished:
        os.remove(from_path)
    return to_path


def _extract(from_path, to_path, name):
    if name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
        with tarfile.open(from_path) as tar:
            if hasattr(tarfile, "data_filter"):   # refuse absolute paths and links out
                tar.extractall(to_path, filter="data")
            else:
                tar.extractall(to_path)
    elif name.endswith(".zip"):
        with zipfile.ZipFile(from_path) as zf:
            zf.extractall(to_path)
    elif name.endswith(".gz"):
        dest = os.path.join(to_path, name[:-3])
        with gzip.open(from_path, "rb") as src, atomic_write(dest, "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
    else:
        raise NotImplementedError(f"extract_archive: cannot extract {name!r} (known: .gz, .tar, "
                                  f".tar.gz, .tgz, .tar.bz2, .tar.xz, .zip)")


def download_and_extract_archive(url, download_root, extract_root=None, filename=None, md5=None,
                                 remove_finished=False, *, timeout=60.0):
    """``download_url`` then ``extract_archive`` (the MD5 is checked before extracting)."""
    download_root = os.path.expanduser(os.fspath(download_root))
    if extract_root is None:
        extract_root = download_root
    if not filename:
        filename = os.path.basename(url.rstrip("/"))
    path = download_url(url, download_root, filename, md5, timeout=timeout)
    extract_archive(path, extract_root, remove_finished)
    return path


def download_from_mirrors(mirrors, filename, root, md5=None, *, extract=True, timeout=60.0,
                          log=print):
    """Try ``mirror + filename`` for each mirror in turn until one downloads with the right MD5.

    A mirror that cannot be reached, answers with an HTTP error or serves a file with
    the wrong checksum is reported through ``log`` and the next one is tried. When
    every mirror fails, ``RuntimeError`` lists each URL with its error.
    """
    errors = []
    for mirror in mirrors:
        url = mirror + filename
        log(f"Downloading {url}")
        try:
            if extract:
                return download_and_extract_archive(url, root, filename=filename, md5=md5,
                                                    timeout=timeout)
            return download_url(url, root, filename, md5, timeout=timeout)
        except (OSError, ChecksumError, EOFError) as err:
            errors.append(f"  {url}: {err}")
            log(f"Failed to download {url} ({err}); trying the next mirror")
    raise RuntimeError(f"Error downloading {filename}: every mirror failed:\n" + "\n".join(errors)
                       + f"\nYou can download the file by hand and put it in {root}")
