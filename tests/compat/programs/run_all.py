"""Run several programs in this one process (so torch is imported once), each as
``__main__`` with its own argv; print each one's output after a marker line.

    python run_all.py '[["train_mlp.py"], ["rnn_lm.py", "--cell", "gru"]]'
    python -m ember run run_all.py '...'     # the same, with torch served by ember
"""
import contextlib
import io
import json
import os
import runpy
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    runs = json.loads(sys.argv[1])
    status = 0
    for argv in runs:
        buf = io.StringIO()
        sys.argv = list(argv)
        try:
            with contextlib.redirect_stdout(buf):
                runpy.run_path(os.path.join(HERE, argv[0]), run_name="__main__")
            ok = "ok"
        except BaseException:  # report and go on with the next program
            ok = "failed"
            status = 1
            buf.write(traceback.format_exc())
        print(f"=== {json.dumps(argv)} {ok}")
        print(buf.getvalue(), end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
