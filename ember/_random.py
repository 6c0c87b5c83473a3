"""Random numbers: generators, seeding, and sampling that reproduces PyTorch's CPU streams.

PyTorch's CPU generator is a 32-bit Mersenne Twister (``std::mt19937``) seeded with
the low 32 bits of the seed; NumPy's ``MT19937`` bit generator is the same engine,
and its ``random_raw`` gives the raw 32-bit outputs without a Python loop. The
kernels in :mod:`ember._random_kernels` turn those outputs into values exactly as
PyTorch's CPU kernels do; docs/random.md lists which calls match bit for bit.
"""
import os

import numpy as np

from ember import _random_kernels as K
from ember import backend
from ember._tensor import Tensor, _make

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]

_N = 624
_DEFAULT_SEED = 67280421310721  # c10::detail::default_rng_seed_val
# PyTorch's CPUGeneratorImplState, byte for byte (torch.get_rng_state() is 5056 bytes)
_STATE = np.dtype([("seed", "<u8"), ("left", "<i4"), ("seeded", "<i4"), ("next", "<u8"),
                   ("state", "<u8", (_N,)), ("normal_x", "<f8"), ("normal_y", "<f8"),
                   ("normal_rho", "<f8"), ("normal_is_valid", "<i4"), ("_pad", "V4"),
                   ("next_float", "<f4"), ("float_is_valid", "u1"), ("_pad2", "V3")])
assert _STATE.itemsize == 5056


def _seed_value(seed, strict):
    """PyTorch's reading of a seed: an int in [-2**63, 2**64), negative ones wrapped."""
    if strict and not isinstance(seed, (int, np.integer)):
        raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
    seed = int(seed)
    if not -(1 << 63) <= seed < 1 << 64:
        raise ValueError("Overflow when unpacking long long")
    return seed % (1 << 64)


class Generator:
    """A pseudo-random number generator: the state behind every sampling call.

    Same engine, seeding and state layout as ``torch.Generator`` on the CPU, so after
    ``g.manual_seed(s)`` the calls listed in docs/random.md draw the values PyTorch
    draws. A new generator starts from PyTorch's fixed default seed.

        >>> g = ember.Generator().manual_seed(0)
        >>> ember.rand(2, generator=g)
        tensor([0.4963, 0.7682])
    """

    def __init__(self, device="cpu"):
        self._device = backend.device(device)
        self._bg = np.random.MT19937(0)
        self._reseed(_DEFAULT_SEED)

    # ----- seeding and state -----------------------------------------------------------
    def _reseed(self, seed):
        key = np.random.RandomState(seed & 0xFFFFFFFF).get_state()[1]
        self._bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": _N}}
        self._seed = seed
        self._fresh = True  # PyTorch's engine reports next=0 (not 624) until it draws
        self._next_double = None
        self._next_float = None

    def manual_seed(self, seed):
        """Seed the generator (the low 32 bits seed the Mersenne Twister); returns self."""
        self._reseed(_seed_value(seed, strict=True))
        return self

    def seed(self):
        """Seed from a non-deterministic source and return that 64-bit seed."""
        s = int.from_bytes(os.urandom(8), "little")
        self._reseed(s)
        return s

    def initial_seed(self):
        """The seed this generator was last seeded with."""
        return self._seed

    @property
    def device(self):
        return self._device

    def get_state(self):
        """The state as a uint8 tensor, laid out as PyTorch's (``torch.Generator.get_state``)."""
        st = self._bg.state["state"]
        pos = int(st["pos"])
        rec = np.zeros((), _STATE)
        rec["seed"] = self._seed
        rec["left"] = _N + 1 - pos
        rec["seeded"] = 1
        rec["next"] = 0 if (pos == _N and self._fresh) else pos
        rec["state"] = st["key"]
        if self._next_double is not None:
            rec["normal_is_valid"] = 1
            rec["normal_y"] = self._next_double
        if self._next_float is not None:
            rec["float_is_valid"] = 1
            rec["next_float"] = self._next_float
        return _make(np.frombuffer(rec.tobytes(), np.uint8).copy(), False)

    def set_state(self, new_state):
        """Restore a state from :meth:`get_state` (or from ``torch.Generator.get_state``)."""
        if not isinstance(new_state, Tensor) or new_state._data.dtype != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        raw = np.ascontiguousarray(new_state._host()).ravel()
        if raw.size != _STATE.itemsize:
            raise RuntimeError(f"Expected a CPUGeneratorImplState of size {_STATE.itemsize} but "
                               f"found the input RNG state size to be {raw.size}")
        rec = np.frombuffer(raw.tobytes(), _STATE)[0]
        left, nxt = int(rec["left"]), int(rec["next"])
        if not (rec["seeded"] and 0 < left <= _N and nxt <= _N):
            raise RuntimeError("Invalid mt19937 state")
        if left == 1:
            pos = _N  # the next draw twists first
        elif nxt + left - 1 == _N:
            pos = nxt
        else:
            raise NotImplementedError("set_state: an mt19937 state whose 'left' and 'next' "
                                      "fields disagree cannot be represented")
        key = (rec["state"] & 0xFFFFFFFF).astype(np.uint32)
        self._bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
        self._seed = int(rec["seed"])
        self._fresh = left == 1 and nxt == 0
        self._next_double = float(rec["normal_y"]) if rec["normal_is_valid"] else None
        self._next_float = float(rec["next_float"]) if rec["float_is_valid"] else None
        return self

    def clone_state(self):
        """A new generator in this one's state."""
        g = Generator(self._device)
        g.set_state(self.get_state())
        return g

    def __repr__(self):
        return f"<ember.Generator object at {hex(id(self))}>"

    # ----- raw draws ----------------------------------------------------------------------
    def _u32(self, n):
        """``n`` raw 32-bit outputs (PyTorch's ``random()``)."""
        if n:
            self._fresh = False
        return self._bg.random_raw(n).astype(np.uint32)

    def _raw(self, n):
        """``n`` raw 32-bit outputs, each in a uint64 (``random_raw``'s own array, no copy)."""
        if n:
            self._fresh = False
        return self._bg.random_raw(n)

    def _raw_compiled(self, n, fill):
        """``n`` raw 32-bit outputs (uint32) made by a compiled Mersenne Twister
        ``fill(key, pos, out) -> pos`` on a copy of the state, which is then written back:
        the same outputs and the same final state as ``_raw``."""
        if n:
            self._fresh = False
        state = self._bg.state
        key = np.array(state["state"]["key"], dtype=np.uint32)
        out = np.empty(n, np.uint32)
        pos = fill(key, int(state["state"]["pos"]), out)
        self._bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
        return out

    def _u64(self, n):
        """``n`` 64-bit draws made of two outputs, the first high (PyTorch's ``random64()``)."""
        r = self._u32(2 * n).astype(np.uint64)
        return (r[0::2] << np.uint64(32)) | r[1::2]


default_generator = Generator()
default_generator.seed()  # like PyTorch, the default generator starts unpredictable


def manual_seed(seed):
    """Seed the default generator (``torch.manual_seed``); returns it."""
    default_generator._reseed(_seed_value(seed, strict=False))
    return default_generator


def seed():
    """Seed the default generator non-deterministically and return the 64-bit seed."""
    return default_generator.seed()


def initial_seed():
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor (PyTorch's 5056-byte layout)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator from :func:`get_rng_state`."""
    default_generator.set_state(new_state)


def _gen(generator):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, not {type(generator).__name__}")
    return generator


# ----- array helpers for nn.init and dropout ---------------------------------------------------
def uniform_array(shape, low, high, np_dtype, generator=None):
    """A NumPy array drawn as ``empty(shape, dtype).uniform_(low, high, generator=g)``."""
    shape = tuple(shape)
    return K.uniform(_gen(generator), int(np.prod(shape)), low, high,
                     np.dtype(np_dtype)).reshape(shape)


def normal_array(shape, mean, std, np_dtype, generator=None):
    """A NumPy array drawn as ``empty(shape, dtype).normal_(mean, std, generator=g)``."""
    shape = tuple(shape)
    return K.normal(_gen(generator), int(np.prod(shape)), mean, std,
                    np.dtype(np_dtype)).reshape(shape)


def bernoulli_array(p, shape, generator=None, np_dtype=np.float32):
    """A NumPy array drawn as ``empty(shape, dtype).bernoulli_(p, generator=g)``: ``p`` a
    float (the mask of dropout) or an array broadcastable to ``shape``."""
    shape = tuple(shape)
    g = _gen(generator)
    if np.ndim(p) == 0 and not isinstance(p, np.ndarray):
        return K.bernoulli_scalar(g, int(np.prod(shape)), float(p), np_dtype).reshape(shape)
    p = np.ascontiguousarray(np.broadcast_to(p, shape))
    return K.bernoulli_tensor(g, p, np_dtype).reshape(shape)

