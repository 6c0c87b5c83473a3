"""Train a digit classifier with ember: ``python examples/mnist/train.py --help``.

The training code lives in ``ember/examples/mnist.py`` so that an installed ember runs
it too (``python -m ember.examples.mnist``); this file is the same program.
"""
from ember.examples.mnist import main

if __name__ == "__main__":
    main()
