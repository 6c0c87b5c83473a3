"""ember.nn.functional: PyTorch's ``torch.nn.functional`` built from ember ops.

Composites only: no derivative code lives here.
"""

# ---------------------------------------------------------------------------
# Convolution / pooling / normalization primitives (owned by the conv/pool/norm
# engineer): add `from ember.ops.nn import ...` lines below this line.
# ---------------------------------------------------------------------------
