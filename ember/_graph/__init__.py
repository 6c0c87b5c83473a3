"""ember's graph capture and IR, shared by every tool that records a program.

* :mod:`ember._graph.capture`: the capture, a mode on the mode stack
  (``ember.autograd._modes``) that records each op call as a node;
* :mod:`ember._graph.ir`: the recorded :class:`~ember._graph.ir.Graph` (Values, Nodes,
  replay, dead-code elimination);
* :mod:`ember._graph.record`: run a function or module once under a capture, binding its
  inputs, parameters and outputs.

``ember.jit`` (trace, TorchScript writing), ``ember.onnx`` (export), ``ember.compile`` and
``ember.export`` (``ember/_compile``) and the graph pictures (``ember.utils``) read the
graphs it records. See docs/design.md, "Capture and IR".
"""
