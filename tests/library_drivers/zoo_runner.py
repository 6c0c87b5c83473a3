"""The command line the registry sweeps share (timm_zoo.py, transformers_zoo.py):
``DRIVER OUT.npz [KEY ...]`` runs ``run(key, out)`` for each key (all by default), an
exception recorded as the key's error for the test to compare with the other run's, the
CPU seconds of each printed; the numbers go to OUT.npz."""
import sys
import time

import numpy as np


def main(run, keys, versions):
    """Run ``run(key, out)`` for the keys named on the command line (else ``keys``) and
    save ``out`` to the .npz file named first; ``versions``: printed at the end."""
    out = {}
    for key in sys.argv[2:] or keys:
        start = time.process_time()
        try:
            run(key, out)
        except Exception as e:  # recorded, compared with the other run by the test
            out = {k: v for k, v in out.items() if not k.startswith(f"{key}/")}
            out[f"{key}/error"] = np.array(f"{type(e).__name__}: {e}"[:300])
        print(f"seconds {key} {time.process_time() - start:.2f}", flush=True)
    np.savez(sys.argv[1], **out)
    print("done", *versions)
