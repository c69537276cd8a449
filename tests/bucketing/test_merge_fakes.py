"""bucketing.merge._Fakes: a view of a fake value the bucket made is taken of the plain meta
tensor it wraps, and is the view of the fake value: the same shape, stride, offset, storage,
dtype and device, a FakeTensor of the mode; a value made elsewhere is viewed on its storage.
(tests/replay/test_merge_fake_values.py compares whole merges with fake dispatch.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode  # noqa: E402
from torch.utils._mode_utils import no_dispatch  # noqa: E402

from bucketing.merge import _Fakes  # noqa: E402

aten = torch.ops.aten
OPS = [
    (aten.view.default, ([4, -1],)),
    (aten.slice.Tensor, (0, 1, 3)),
    (aten._unsafe_view.default, ([2, 48],)),
    (aten.split_with_sizes.default, ([8, 16], 1)),
]


def _described(t) -> tuple:
    return (
        tuple(t.shape),
        t.stride(),
        t.storage_offset(),
        t.dtype,
        str(t.device),
        t.untyped_storage()._cdata,
    )


@pytest.mark.parametrize(("op", "args"), OPS)
def test_a_view_of_a_value_made_here_is_the_view_of_the_fake_value(op, args):
    mode = FakeTensorMode()
    fakes = _Fakes(mode)
    made = fakes.new((4, 24), torch.bfloat16, torch.device("cpu"))
    assert isinstance(made, FakeTensor) and made.fake_mode is mode
    with no_dispatch():
        through_fake = op(made, *args)
    ours = fakes.apply(op, made, args)
    pairs = (
        list(zip(ours, through_fake, strict=True))
        if isinstance(ours, (list, tuple))
        else [(ours, through_fake)]
    )
    for plain, expected in pairs:
        assert not isinstance(plain, FakeTensor)  # the plain meta tensor's view
        assert _described(plain)[:3] == _described(expected)[:3]
        wrapped = fakes.wrap(plain, made.fake_device)
        assert _described(wrapped) == _described(expected)[:4] + ("cpu", made.untyped_storage()._cdata)
        again = fakes.apply(aten.slice.Tensor, wrapped, (0, 0, 1))  # and a view of that view
        assert again.untyped_storage()._cdata == made.untyped_storage()._cdata


def test_a_value_on_a_gpu_is_viewed_on_its_meta_tensor():
    """A log's graph has its values on cuda; torch without CUDA kernels cannot run a view of
    such a fake tensor without dispatch (the merge then asked fake dispatch), its meta tensor
    it can: the bucket's rows and parts, as fake dispatch gives them."""
    mode = FakeTensorMode()
    fakes = _Fakes(mode)
    wait = fakes.new((4 * 24,), torch.bfloat16, torch.device("cuda", 1))
    rows = fakes.wrap(fakes.apply(aten.view.default, wait, ([4, -1],)), wait.fake_device)
    parts = [
        fakes.wrap(p, wait.fake_device)
        for p in fakes.apply(aten.split_with_sizes.default, rows, ([8, 16], 1))
    ]
    with mode:
        expected = aten.split_with_sizes.default(aten.view.default(wait, [4, -1]), [8, 16], 1)
    storage = wait.untyped_storage()._cdata
    assert [_described(p) for p in parts] == [_described(e)[:5] + (storage,) for e in expected]
    assert [str(p.device) for p in parts] == ["cuda:1", "cuda:1"]
    assert [(tuple(p.shape), p.stride(), p.storage_offset()) for p in parts] == [
        ((4, 8), (24, 1), 0),
        ((4, 16), (24, 1), 8),
    ]


def test_a_value_made_elsewhere_is_viewed_on_its_storage():
    """A member's input (made by the rebuild, on a GPU as in a real run's log): a plain meta
    tensor on its storage, sizes, strides and offset, once per bucket."""
    mode = FakeTensorMode()
    elsewhere = FakeTensor(
        mode, torch.empty(6, 8, device="meta")[:, 2:6], torch.device("cuda", 0)
    )  # as rebuilt
    fakes = _Fakes(mode)
    meta = fakes.meta_of(elsewhere)
    assert not isinstance(meta, FakeTensor) and str(meta.device) == "meta"
    assert (tuple(meta.shape), meta.stride(), meta.storage_offset()) == ((6, 4), (8, 1), 2)
    assert meta.untyped_storage()._cdata == elsewhere.untyped_storage()._cdata
    assert fakes.meta_of(elsewhere) is meta
    out = fakes.wrap(fakes.apply(aten.slice.Tensor, elsewhere, (1, 1, 3)), elsewhere.fake_device)
    with mode:
        expected = aten.slice.Tensor(elsewhere, 1, 1, 3)
    assert _described(out) == _described(expected)
    other = _Fakes(mode)  # another bucket's values are not this one's
    made = other.new((6, 4), torch.float32, torch.device("cpu"))
    assert fakes.meta_of(made).untyped_storage()._cdata == made.untyped_storage()._cdata
    assert fakes.meta_of(made) is not other.meta_of(made)
