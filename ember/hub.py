"""``torch.hub``: ember works offline, so nothing is downloaded. Checkpoints already in
the hub cache (``get_dir()/checkpoints``, as PyTorch lays it out) load with
``load_state_dict_from_url``; everything that would fetch code or files from the
network raises a RuntimeError saying so."""
import os
import re
from urllib.parse import urlparse

__all__ = ["get_dir", "set_dir", "list", "help", "load", "download_url_to_file",
           "load_state_dict_from_url"]

_hub_dir = [None]

# the hash prefix in a checkpoint's file name (``resnet18-f37072fd.pth``), as torch's
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")


def get_dir():
    """The hub cache: ``set_dir``'s choice, else ``$TORCH_HOME/hub``, else
    ``~/.cache/torch/hub`` (``$XDG_CACHE_HOME`` respected), as in PyTorch."""
    if _hub_dir[0] is not None:
        return _hub_dir[0]
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
        "torch")
    return os.path.join(os.path.expanduser(torch_home), "hub")


def set_dir(d):
    """Use ``d`` as the hub cache."""
    _hub_dir[0] = os.path.expanduser(os.fspath(d))


def _offline(what):
    return RuntimeError(f"torch.hub.{what}: ember does not download anything (it runs "
                        "offline); fetch the model or checkpoint with PyTorch or by hand and "
                        "load it with ember.load / load_state_dict")


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True):
    """Raises: listing a hub repository needs the network."""
    raise _offline("list")


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None):
    """Raises: reading a hub entry point needs the network."""
    raise _offline("help")


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """Raises: hub models are PyTorch code fetched from GitHub."""
    raise _offline("load")


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Raises: downloading needs the network."""
    raise _offline("download_url_to_file")


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=True):
    """Load a checkpoint that is already in the hub cache (``<hub>/checkpoints/<name>``,
    the file name taken from the URL as PyTorch does); raise if it would need a
    download.

    Unlike PyTorch (whose default here is ``weights_only=False``), the file is read
    with the restricted weights-only unpickler unless you pass ``weights_only=False``:
    files from the internet are untrusted. Opt in to full unpickling only for a source
    you trust, since it can run any code the file names."""
    import ember
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    name = file_name or os.path.basename(urlparse(url).path)
    path = os.path.join(model_dir, name)
    if not os.path.exists(path):
        raise RuntimeError(f"torch.hub.load_state_dict_from_url: {path} is not in the hub "
                           "cache and ember does not download (it runs offline); put the file "
                           "there or load it with ember.load")
    return ember.load(path, map_location=map_location, weights_only=weights_only)
