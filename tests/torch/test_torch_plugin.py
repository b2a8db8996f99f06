"""The mmeval-torch distribution in one process: registration, cheap import, detection, tensor pickling, sizes.

Nothing here initializes torch.distributed in the test process.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import pytest
import torch

import mmeval_torch
from mmeval.core import dist as registry
from mmeval.core.errors import FrameDecodeError
from mmeval.core.wire import codecs
from mmeval_torch import TorchCPUDist, TorchCUDADist, rebuild_tensor, reduce_tensor, tensor_codec
from mmeval_torch.backends import BLOCK_ALIGN, backend_map, padded_block_size, split_blocks

GiB = 1 << 30


def _roundtrip(obj: Any, readonly: bool = False) -> Any:
    frame = encode(obj)
    if readonly:
        return decode(frame.tobytes())
    buf = bytearray(frame.nbytes)
    frame.write_into(memoryview(buf))
    return decode(memoryview(buf))


# -- registration -----------------------------------------------------------------


def test_entry_points_register_both_backends() -> None:
    assert {"torch_cpu", "torch_cuda"} <= set(registry.list_all_backends(refresh=True))
    infos = {i.name: i for i in registry.backend_infos()}
    for name in ("torch_cpu", "torch_cuda"):
        assert infos[name].status == "ok", infos[name].error
        assert infos[name].distribution == "mmeval-torch"
        assert infos[name].version == mmeval_torch.__version__ == "0.1.0"
        assert infos[name].core_requirement and infos[name].core_requirement.startswith("mmeval-core")
    assert registry.get_dist_backend_class("torch_cpu") is TorchCPUDist
    assert registry.get_dist_backend_class("torch_cuda") is TorchCUDADist
    assert TorchCPUDist.name == "torch_cpu" and TorchCUDADist.name == "torch_cuda"


def test_mmeval_legacy_class_names_resolve_to_the_plugin() -> None:
    from mmeval.core import dist_backends

    assert dist_backends.TorchCPUDist is TorchCPUDist
    assert dist_backends.TorchCUDADist is TorchCUDADist


def test_import_and_detect_do_not_import_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        import mmeval_torch
        from mmeval.core.dist import get_dist_backend_class, resolve_backend_name
        cls = get_dist_backend_class("torch_cpu")
        assert not cls.detect() and not get_dist_backend_class("torch_cuda").detect()
        backend = cls(timeout=5)
        assert backend.is_initialized is False
        assert resolve_backend_name("auto") != "torch_cpu"
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_not_initialized_here() -> None:
    backend = TorchCPUDist()
    assert TorchCPUDist.detect() is False and TorchCUDADist.detect() is False
    assert backend.is_initialized is False
    with pytest.raises(RuntimeError, match=r"torch_cpu: torch\.distributed is not initialized"):
        _ = backend.rank
    if torch.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"torch_cuda: torch\.distributed is not initialized"):
            _ = TorchCUDADist().world_size
    else:  # torch_cuda refuses at construction where CUDA is not available (issue 16.7)
        with pytest.raises(RuntimeError, match=r"torch_cuda: CUDA is not available.*use torch_cpu"):
            TorchCUDADist()
    assert "not initialized" in repr(backend)


def test_constructor_arguments_and_settings(monkeypatch: Any) -> None:
    group = object()
    backend = TorchCPUDist(group, timeout=2.5, codec="safe")
    assert (backend.group, backend.timeout, backend.codec) == (group, 2.5, "safe")
    monkeypatch.setenv("MMEVAL_TORCH_CPU_TIMEOUT", "7")
    monkeypatch.setenv("MMEVAL_TIMEOUT", "9")
    assert TorchCPUDist().timeout == 7.0
    if torch.cuda.is_available():  # else torch_cuda refuses at construction
        assert TorchCUDADist().timeout == 9.0
    with pytest.raises(ValueError, match="codec"):
        TorchCPUDist(codec="marshal")
    with pytest.raises(ValueError, match="at least"):
        TorchCPUDist(timeout=0)


@pytest.mark.parametrize(
    "config,expected",
    [
        ("gloo", {"cpu": "gloo", "cuda": "gloo"}),
        ("nccl", {"cuda": "nccl"}),
        ("mpi", {"cpu": "mpi", "cuda": "mpi"}),
        ("cpu:gloo,cuda:nccl", {"cpu": "gloo", "cuda": "nccl"}),
        ("cuda:nccl", {"cuda": "nccl"}),
        ("CPU:gloo", {"cpu": "gloo"}),
    ],
)
def test_backend_map(config: str, expected: dict) -> None:
    assert backend_map(config) == expected


# -- sizes ------------------------------------------------------------------------


def test_padded_block_size() -> None:
    assert padded_block_size([]) == 0
    assert padded_block_size([0, 0]) == 0
    assert padded_block_size([1, 0]) == BLOCK_ALIGN == 64
    assert padded_block_size([64, 3]) == 64
    assert padded_block_size([65, 3]) == 128
    # over 2 GiB and 4 GiB: Python ints, no 32-bit wrap-around
    assert padded_block_size([2 * GiB + 1, 5]) == 2 * GiB + 64
    assert padded_block_size([5, 4 * GiB + 63]) == 4 * GiB + 64
    assert padded_block_size([np.int64(3 * GiB)]) == 3 * GiB
    with pytest.raises(ValueError):
        padded_block_size([-1])


def test_split_blocks_is_zero_copy_and_exact() -> None:
    sizes = [5, 0, 64, 63]
    block = padded_block_size(sizes)
    buf = np.arange(block * len(sizes), dtype=np.int64).astype(np.uint8)
    views = split_blocks(memoryview(buf), block, sizes)
    assert [v.nbytes for v in views] == sizes
    for r, v in enumerate(views):
        assert bytes(v) == buf[r * block : r * block + sizes[r]].tobytes()
    buf[2 * block] = 99  # views alias the buffer
    assert views[2][0] == 99
    with pytest.raises(ValueError):
        split_blocks(memoryview(buf), block, [65, 0, 0, 0])


def test_split_blocks_over_4gib_offsets() -> None:
    """A receive buffer of three blocks over 2 GiB each (calloc'd: pages are never touched)."""
    sizes = [2 * GiB + 1, 7, 2 * GiB + 64]
    block = padded_block_size(sizes)
    try:
        buf = np.zeros(block * len(sizes), dtype=np.uint8)
    except MemoryError:  # pragma: no cover - depends on overcommit
        pytest.skip("cannot reserve 6 GiB of address space here")
    base = buf.ctypes.data
    views = split_blocks(memoryview(buf), block, sizes)
    assert [v.nbytes for v in views] == sizes
    for r, v in enumerate(views):
        start = np.frombuffer(v, dtype=np.uint8, count=1).ctypes.data
        assert start - base == r * block
        assert (start - base) % BLOCK_ALIGN == 0
    assert views[2].nbytes > 2**31 and (2 * block) > 2**32


# -- tensors inside objects -----------------------------------------------------------


def _dtypes() -> list:
    names = [
        "float16",
        "bfloat16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
        "float8_e4m3fn",
        "float8_e5m2",
        "complex32",
    ]
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = a.detach().contiguous(), b.detach().contiguous()
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def encode(obj: Any) -> Any:
    """Encode with the torch backends' codec (the tensor reducer applies there only)."""
    return tensor_codec().encode(obj)


def decode(data: Any) -> Any:
    return tensor_codec().decode(data)


def test_the_tensor_reducer_is_scoped_to_the_torch_backends_codec() -> None:
    t = torch.arange(100_000, dtype=torch.float32)
    assert len(encode(t).parts) > 2  # out-of-band: the tensor's bytes are a segment of their own
    plain = codecs.encode(t)  # the core's plain codec, another backend's, the user's: torch's own pickling
    assert len(plain.parts) == 2 and torch.equal(codecs.decode(plain.tobytes()), t)
    assert TorchCPUDist().reducers() == {torch.Tensor: reduce_tensor}


@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
@pytest.mark.parametrize("numel", [1, 3000], ids=["inband", "out-of-band"])
def test_tensor_roundtrip_preserves_dtype_shape_and_bits(dtype: torch.dtype, numel: int) -> None:
    raw = torch.randint(0, 256, (numel * 16,), dtype=torch.uint8)
    t = raw.view(dtype)[:numel] if dtype.itemsize <= 16 else raw
    if dtype is torch.bool:
        t = raw[:numel] % 2 == 0
    shaped = t.reshape(numel, 1, 1)
    out = _roundtrip({"t": shaped})["t"]
    assert type(out) is torch.Tensor
    assert out.dtype == dtype and out.shape == shaped.shape and out.device.type == "cpu"
    assert _same_bits(out, shaped)


def test_tensor_roundtrip_shapes_and_flags() -> None:
    cases = {
        "scalar": torch.tensor(3.5),
        "empty": torch.empty(0, 3),
        "noncontig": torch.arange(4000.0).reshape(40, 100)[:, ::3],
        "transposed": torch.arange(4000.0).reshape(40, 100).t(),
        "channels_last": torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last),
        "offset": torch.arange(5000, dtype=torch.int64)[1000:],
        "conj": torch.randn(500, dtype=torch.complex64).conj(),
        "leaf_grad": torch.randn(600, requires_grad=True),
        "nonleaf_grad": torch.randn(600, requires_grad=True) * 2,
    }
    out = _roundtrip(cases)
    for key, want in cases.items():
        got = out[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        assert torch.equal(got.detach(), want.detach().resolve_conj()), key
        assert got.requires_grad == want.requires_grad, key
        assert got.is_leaf and got.is_contiguous(), key
        assert not got.is_conj(), key


def test_out_of_band_tensor_views_the_received_bytes() -> None:
    t = torch.arange(100_000, dtype=torch.float32)
    frame = encode({"t": t, "again": t})
    assert frame.nbytes < t.nbytes + 1024, "the tensor's bytes must not be in the pickle stream twice"
    buf = bytearray(frame.nbytes)
    frame.write_into(memoryview(buf))
    received = np.frombuffer(buf, dtype=np.uint8)
    out = decode(memoryview(buf))
    lo, hi = received.ctypes.data, received.ctypes.data + received.nbytes
    assert lo <= out["t"].data_ptr() < hi, "a CPU tensor must be rebuilt as a view of the received buffer"
    assert out["t"] is out["again"], "the same tensor object travels once"
    assert torch.equal(out["t"], t)


def test_readonly_buffer_is_copied_without_warning() -> None:
    t = torch.arange(10_000, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _roundtrip(t, readonly=True)
    out += 1  # writable: a private copy, not the immutable bytes
    assert torch.equal(out, t + 1)


def test_fallbacks_keep_torch_pickling() -> None:
    param = torch.nn.Parameter(torch.randn(3))
    sparse = torch.eye(3).to_sparse()
    out = _roundtrip({"param": param, "sparse": sparse})
    assert type(out["param"]) is torch.nn.Parameter and torch.equal(out["param"].detach(), param.detach())
    assert out["sparse"].layout is torch.sparse_coo and torch.equal(out["sparse"].to_dense(), torch.eye(3))


def test_rebuild_is_importable_and_checks_the_version() -> None:
    assert pickle.loads(pickle.dumps(rebuild_tensor)) is rebuild_tensor
    assert rebuild_tensor.__module__ == "mmeval_torch.tensors"
    t = rebuild_tensor(1, bytearray(8), torch.float32, (2,), False, "cpu")
    assert torch.equal(t, torch.zeros(2))
    with pytest.raises(FrameDecodeError, match="format version 99"):
        decode(encode_with_version(99))


def encode_with_version(version: int) -> bytes:
    """A frame whose tensor claims another format version."""
    import mmeval_torch.tensors as tensors

    class Fake:
        def __reduce__(self) -> Any:
            return tensors.rebuild_tensor, (version, b"\0" * 4, torch.float32, (1,), False, "cpu")

    return encode(Fake()).tobytes()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback of CUDA tensors")
def test_cuda_tensor_without_cuda_is_rebuilt_on_cpu() -> None:
    t = rebuild_tensor(1, bytearray(np.arange(4, dtype=np.float32).tobytes()), torch.float32, (4,), True, "cuda")
    assert t.device.type == "cpu" and t.requires_grad and torch.equal(t.detach(), torch.arange(4.0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: needs a GPU")
def test_cuda_tensor_roundtrip_lands_on_the_current_device() -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    t = torch.arange(5000.0, device=device)
    out = _roundtrip(t)
    assert out.device == device and torch.equal(out, t)


@pytest.mark.parametrize(
    "raw,accepted",
    [("inf", False), ("1e308", False), ("1e10", False), ("0.0005", False), ("1e9", True), ("0.001", True)],
)
def test_timeout_edges_are_refused_at_construction_naming_the_variable(
    monkeypatch: Any, raw: str, accepted: bool
) -> None:
    # gloo/NCCL end an operation at the group's own timeout: 'no limit' cannot be honoured, nor > 1e9 s
    monkeypatch.setenv("MMEVAL_TORCH_CPU_TIMEOUT", raw)
    if accepted:
        assert TorchCPUDist().timeout == float(raw)
    else:
        with pytest.raises(ValueError, match="MMEVAL_TORCH_CPU_TIMEOUT"):
            TorchCPUDist()
