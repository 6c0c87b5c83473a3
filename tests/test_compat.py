"""`python -m ember run` and the torch import hook, in fresh processes."""
import subprocess
import sys
import textwrap


def _run(tmp_path, source, *args):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-m", "ember", "run", str(prog), *args],
                          capture_output=True, text=True, timeout=120)


def test_program_runs_with_torch_served_by_ember(tmp_path):
    r = _run(tmp_path, """
        import sys
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset
        from torch import optim
        print(torch.__name__, nn.__name__, F.__name__, optim.__name__, sys.argv[1:])
        print(__name__)
    """, "--lr", "0.1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[0] == "ember ember.nn ember.nn.functional ember.optim ['--lr', '0.1']"
    assert out[1] == "__main__"


def test_missing_module_and_attribute_name_the_torch_api(tmp_path):
    r = _run(tmp_path, "import torch.distributions_not_there\n")
    assert r.returncode != 0
    assert "torch.distributions_not_there is not implemented in ember yet" in r.stderr
    r = _run(tmp_path, "import torch\ntorch.not_an_api\n")
    assert "torch.not_an_api is not implemented in ember yet" in r.stderr
    assert "AttributeError" in r.stderr


def test_small_pieces_real_programs_touch(tmp_path):
    r = _run(tmp_path, """
        import torch
        from torch.autograd import Variable
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.backends.cudnn.benchmark = True
        assert not torch.accelerator.is_available()
        x = Variable(torch.FloatTensor([1.0, 2.0]), requires_grad=True)
        y = torch.LongTensor([1, 2])
        assert isinstance(x, torch.FloatTensor) and y.dtype == torch.int64
        assert torch.float is torch.float32 and torch.long is torch.int64
        torch.set_num_threads(2)
        (x * 2).sum().backward()
        print(dev, x.grad.tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cpu [2.0, 2.0]"


def test_alias_torch_refuses_when_torch_is_loaded():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch, ember.compat
        try:
            ember.compat.alias_torch()
        except RuntimeError as e:
            print("refused:", "already imported" in str(e))
    """)], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "refused: True", r.stderr


def test_alias_in_process():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import ember.compat
        ember.compat.alias_torch()
        import torch.nn.functional as F
        import ember
        print(F is ember.nn.functional)
        ember.compat.unalias_torch()
    """)], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stderr
