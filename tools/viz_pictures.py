"""Regenerate the pictures of docs/visualization.md (needs Graphviz's dot).

    PYTHONPATH=. python tools/viz_pictures.py
"""
import os

import ember
from ember.examples.mnist import build_model
from ember.viz import draw_module, make_dot

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def main():
    ember.manual_seed(0)
    model = build_model("cnn", 8, 8)
    x = ember.randn(1, 1, 8, 8)
    draw_module(model, x).render(os.path.join(DOCS, "viz_draw_module"), format="png",
                                 cleanup=True)
    mlp = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.Tanh(), ember.nn.Linear(3, 1))
    loss = ember.nn.functional.mse_loss(mlp(ember.randn(5, 4)), ember.zeros(5, 1))
    make_dot(loss, params=dict(mlp.named_parameters())).render(
        os.path.join(DOCS, "viz_make_dot"), format="png", cleanup=True)


if __name__ == "__main__":
    main()
