"""TorchScript templates for ember's recurrent and transformer modules."""

RNN_TEMPLATES = {}
