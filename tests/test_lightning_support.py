"""What Lightning reads from torch beyond the public API: ``torch.PyTorchFileReader``
(its lazy checkpoint loader) and ``torch.utils._pytree``'s ``_get_node_type`` and
NodeDef fields (its own flatten), each compared with torch's."""
import collections

import numpy as np
import torch
import torch.utils._pytree as torch_pytree

import ember
import ember.utils._pytree as ember_pytree


def test_file_reader_reads_torch_checkpoints_as_torch(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(6, dtype=torch.float32), "n": torch.tensor([1, 2])}, path)
    ours, theirs = ember.PyTorchFileReader(str(path)), torch.PyTorchFileReader(str(path))
    assert ember._C.PyTorchFileReader is ember.PyTorchFileReader
    assert sorted(ours.get_all_records()) == sorted(theirs.get_all_records())
    for name in theirs.get_all_records():
        assert ours.get_record(name) == bytes(theirs.get_record(name)), name
        assert ours.has_record(name) and theirs.has_record(name)
    assert not ours.has_record("nothing") and not theirs.has_record("nothing")
    assert ours.serialization_id() == theirs.serialization_id()
    storages = [n for n in theirs.get_all_records() if n.startswith("data/")]
    for name in storages:
        size = len(theirs.get_record(name))
        want = theirs.get_storage_from_record(name, size, torch.uint8)
        got = ours.get_storage_from_record(name, size, ember.uint8)
        on_storage = torch.tensor([], dtype=torch.uint8).set_(want.untyped_storage())
        np.testing.assert_array_equal(got.numpy(), on_storage.numpy())
    f32 = [n for n in storages if len(theirs.get_record(n)) == 24][0]
    np.testing.assert_array_equal(ours.get_storage_from_record(f32, 6, ember.float32).numpy(),
                                  np.arange(6, dtype=np.float32))


def test_pytree_node_type_and_nodedef_fields_as_torch():
    Point = collections.namedtuple("Point", "x y")
    for tree in ({"a": 1}, [1, 2], (1,), Point(1, 2), 3, "s", collections.OrderedDict(a=1)):
        want = torch_pytree._get_node_type(tree)
        got = ember_pytree._get_node_type(tree)
        assert got is want, tree
        assert (got in ember_pytree.SUPPORTED_NODES) == (want in torch_pytree.SUPPORTED_NODES)
        if want in torch_pytree.SUPPORTED_NODES:
            theirs = torch_pytree.SUPPORTED_NODES[want].flatten_fn(tree)
            ours = ember_pytree.SUPPORTED_NODES[got].flatten_fn(tree)
            assert list(ours[0]) == list(theirs[0]) and ours[1] == theirs[1], tree
            assert ember_pytree.SUPPORTED_NODES[got].unflatten_fn(*ours) == tree
