"""Out-of-band pickling of ``torch.Tensor`` for mmeval's frame codec.

mmeval's pickle codec (:mod:`mmeval.core.serialization`) takes contiguous
buffers out of the pickle stream (pickle protocol 5) and copies them once,
straight into the transport's send buffer. torch's own ``Tensor.__reduce_ex__``
goes through ``torch.save`` machinery and copies the storage into the stream;
:func:`reduce_tensor` instead hands pickle a :class:`pickle.PickleBuffer` over
the tensor's bytes, and :func:`rebuild_tensor` turns the received bytes back
into a tensor that *views* them (no copy on the receiving side for CPU tensors).

What is preserved: dtype (every dtype, ``bfloat16`` and the float8 types
included: the bytes travel as ``uint8`` and are reinterpreted with
``Tensor.view(dtype)``), shape, ``requires_grad`` (the rebuilt tensor is a
leaf), and the device kind: a CUDA tensor is rebuilt on the receiver's
*current* CUDA device when CUDA is available there, else on the CPU.

What is not: storage sharing between different tensor objects (each tensor
travels as its own contiguous copy; the same object twice is sent once, by
pickle's memo), strides (rebuilt tensors are contiguous), and autograd history
(tensors are detached). Sparse, quantized, nested, meta, named tensors, tensors
with Python attributes and devices other than CPU and CUDA fall back to torch's
own pickling.

The reducer applies to the exact type ``torch.Tensor`` (subclasses such as
``torch.nn.Parameter`` keep their own pickling), in the codec of this package's
backends only (:func:`tensor_reducers`; the core scopes reducers to the backend
that declares them). Importing this module does not import torch.
"""

from __future__ import annotations

import pickle
import sys
from typing import TYPE_CHECKING, Any, Dict, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from mmeval.core.dist_backends import PickleCodec

__all__ = ["tensor_reducers", "tensor_codec", "reduce_tensor", "rebuild_tensor", "INBAND_MAX", "FORMAT_VERSION"]

#: Tensors of at most this many bytes travel inside the pickle stream (a copy
#: of a few bytes is cheaper than an out-of-band buffer, which is 64-byte
#: aligned in the frame and described by its own length field).
INBAND_MAX = 1024

#: Version of the argument tuple :func:`rebuild_tensor` receives.
FORMAT_VERSION = 1

_DEVICE_KINDS = ("cpu", "cuda")


def tensor_reducers() -> Dict[type, Any]:
    """``{torch.Tensor: reduce_tensor}`` for a pickle codec, or ``{}`` when torch is not imported.

    The torch backends return this from ``reducers()``: the reducer applies to
    their own codec only, never to another backend's or to the user's pickling.
    Does not import torch (nothing could hold a tensor without it).
    """
    torch_mod = sys.modules.get("torch")
    if torch_mod is None or not hasattr(torch_mod, "Tensor"):
        return {}  # torch absent, or half-way through its own import
    return {torch_mod.Tensor: reduce_tensor}


def tensor_codec() -> "PickleCodec":
    """A pickle codec that sends tensors out-of-band (what the torch backends encode with)."""
    from mmeval.core.dist_backends import PickleCodec

    return PickleCodec(tensor_reducers())


def reduce_tensor(tensor: "torch.Tensor") -> Any:
    """A ``__reduce__``-style tuple for ``tensor`` whose bytes travel out-of-band.

    Returns ``NotImplemented`` (pickle then uses torch's own reduction) for the
    tensors this fast path does not cover; see the module doc. CUDA tensors are
    copied to the CPU here (one device-to-host copy); non-contiguous tensors are
    made contiguous (one copy); contiguous CPU tensors are not copied at all
    until the frame is written into the transport's buffer.
    """
    import torch

    if (
        tensor.layout is not torch.strided
        or tensor.is_quantized
        or tensor.is_nested
        or tensor.device.type not in _DEVICE_KINDS
        or _has_names(tensor)
        or tensor.__dict__
    ):
        return NotImplemented
    device_kind = tensor.device.type
    data = tensor.detach()
    if data.is_conj():
        data = data.resolve_conj()
    if data.is_neg():
        data = data.resolve_neg()
    if device_kind != "cpu":
        data = data.cpu()
    if not data.is_contiguous():
        data = data.contiguous()
    raw: Any = data.reshape(-1).view(torch.uint8).numpy()
    payload: Union[bytes, pickle.PickleBuffer]
    payload = raw.tobytes() if raw.nbytes <= INBAND_MAX else pickle.PickleBuffer(raw)
    return rebuild_tensor, (
        FORMAT_VERSION,
        payload,
        tensor.dtype,
        tuple(tensor.shape),
        bool(tensor.requires_grad),
        device_kind,
    )


def _has_names(tensor: "torch.Tensor") -> bool:
    # named tensors: present in torch 2.0, gone from recent releases
    has_names = getattr(tensor, "has_names", None)
    return bool(has_names is not None and has_names())


def rebuild_tensor(
    version: int,
    payload: Any,
    dtype: "torch.dtype",
    shape: Tuple[int, ...],
    requires_grad: bool,
    device_kind: str,
) -> "torch.Tensor":
    """Rebuild a tensor sent by :func:`reduce_tensor`.

    ``payload`` is the received buffer (a writable view into the transport's
    receive buffer, or ``bytes`` for small tensors). A CPU tensor views a
    writable buffer without copying (it keeps the receive buffer alive); a
    read-only buffer is copied once, so that the tensor never writes to
    immutable memory. ``device_kind == 'cuda'`` rebuilds on
    ``torch.cuda.current_device()`` when CUDA is available, else on the CPU.
    """
    import numpy as np
    import torch

    if version != FORMAT_VERSION:
        raise ValueError(
            f"mmeval_torch.rebuild_tensor: tensor format version {version} is not {FORMAT_VERSION}; "
            "install the same mmeval-torch on every rank"
        )
    view = memoryview(payload)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    if view.readonly:
        view = memoryview(bytearray(view))
    flat = torch.from_numpy(np.frombuffer(view, dtype=np.uint8))
    out = flat if dtype == torch.uint8 else flat.view(dtype)
    out = out.reshape(shape)
    if device_kind == "cuda" and torch.cuda.is_available():
        out = out.to(torch.device("cuda", torch.cuda.current_device()))
    if requires_grad:
        out.requires_grad_(True)
    return out
