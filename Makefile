# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# the timm release tests/library_drivers/timm_models.py runs (installed with --no-deps)
TIMM := timm==1.0.31

.PHONY: demo test lint bench clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.test: $(VENV)/.base pyproject.toml
	# torch is the test oracle; the exact pin takes the CPU wheel and never a CUDA build,
	# and the constraints file keeps any library among the test extras from moving it.
	$(PIP) install -q -c .ci/constraints.txt -e '.[test]'
	# timm without its dependencies: it requires torchvision, whose index build is CUDA's
	# and cannot load beside the CPU torch (tests/library_drivers/timm_models.py stands in
	# for the torchvision names timm imports; its other dependencies are in the extra)
	$(PIP) install -q -c .ci/constraints.txt --no-deps '$(TIMM)'
	touch $@

$(VENV)/.demo: $(VENV)/.base pyproject.toml
	$(PIP) install -q -e '.[demo]'
	touch $@

# the main job: train a digit classifier (MNIST if data/MNIST is there, else the bundled digits)
demo: $(VENV)/.demo
	$(PY) examples/mnist/train.py

test: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	# two test workers on two cores: one BLAS/OpenMP thread each avoids oversubscription
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 -p no:cacheprovider

lint: $(VENV)/.test
	$(VENV)/bin/ruff check .

# every benchmark runs the same workload on ember and torch in one process
bench: $(VENV)/.test
	$(PY) benchmarks/op_overhead.py
	$(PY) benchmarks/training_steps.py --threads 1
	$(PY) benchmarks/cnn_step.py
	$(PY) benchmarks/rnn_steps.py --threads 1
	$(PY) benchmarks/transformer_step.py --threads 1
	$(PY) benchmarks/gemm.py
	$(PY) benchmarks/dataloader.py
	$(PY) benchmarks/checkpoint_io.py
	$(PY) benchmarks/jit_inference.py --threads 1
	$(VENV)/bin/mpiexec -n 2 $(PY) benchmarks/distributed.py

clean:
	rm -rf $(VENV)
