"""``cupy.cuda.runtime`` of the CPU test double: one device, named as fake."""
import os


def getDeviceCount():  # noqa: N802  (CuPy's spelling)
    """Devices seen: 1, or ``FAKE_CUPY_DEVICES`` when set (0 models a machine without one)."""
    return int(os.environ.get("FAKE_CUPY_DEVICES", "1"))


def getDeviceProperties(device):  # noqa: N802
    """The properties CuPy reports for ``device``."""
    return {"name": b"Fake CuPy GPU (NumPy on the CPU)", "totalGlobalMem": 1 << 30,
            "major": 9, "minor": 0, "multiProcessorCount": 1}


def runtimeGetVersion():  # noqa: N802
    """The CUDA runtime version the double pretends to be."""
    return 13000


def deviceSynchronize():  # noqa: N802
    """Wait for the device (nothing to wait for)."""
