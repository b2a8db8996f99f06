"""The shared metric case table fed torch tensors: every numeric array of a case's inputs becomes a tensor.

:func:`on_device` rewrites a payload of tests/metric_cases.py so that each case's metric is a
subclass of the case's metric whose ``add()`` turns every numeric numpy array in its arguments
(nested in lists, tuples and dicts too) into a torch tensor on ``device`` -- what a user's model
hands over -- before the metric's own ``add()`` sees it. The one-process answers (``want``) stay
those of the numpy inputs: a metric must give the same answer whatever array type it is fed.

The subclasses are made in the process that runs the cases (a rank) and found by
:func:`metric_cases.metric_class` through this module's attributes.
"""

from __future__ import annotations

import copy
from typing import Any, Dict

import numpy as np

#: numpy dtype kinds turned into tensors (bool, signed, unsigned, float); strings, bytes, objects stay
_NUMERIC = "biuf"


def to_tensors(value: Any, device: str) -> Any:
    """``value`` with every numeric numpy array (and numpy scalar) inside it as a torch tensor on ``device``."""
    import torch

    if isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC:
        if value.dtype == np.uint16 or value.dtype == np.uint32 or value.dtype == np.uint64:
            value = value.astype(np.int64)  # torch has no unsigned 16-64 bit tensors a model would hand over
        return torch.from_numpy(np.ascontiguousarray(value)).to(device)
    if isinstance(value, dict):
        return {k: to_tensors(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_tensors(v, device) for v in value)
    return value


def _subclass(cls: Any, device: str) -> Any:
    def add(self: Any, *args: Any, **kwargs: Any) -> Any:
        indices = kwargs.pop("indices", None)
        args = tuple(to_tensors(a, device) for a in args)
        kwargs = {k: to_tensors(v, device) for k, v in kwargs.items()}
        if indices is not None:
            kwargs["indices"] = indices  # dataset positions stay as the sampler gives them
        return cls.add(self, *args, **kwargs)

    return type(f"{cls.__name__}On{device.split(':')[0].upper()}", (cls,), {"add": add, "__module__": __name__})


def on_device(payload: Dict[str, Dict[str, Any]], device: str) -> Dict[str, Dict[str, Any]]:
    """A copy of ``payload`` whose cases' metrics take their inputs as tensors on ``device``."""
    import metric_cases

    out = {}
    for name, case in payload.items():
        cls = metric_cases.metric_class(case["metric"])
        attr = "case_" + "".join(c if c.isalnum() else "_" for c in name)
        globals()[attr] = _subclass(cls, device)
        case = copy.copy(case)
        case["metric"] = f"{__name__}:{attr}"
        out[name] = case
    return out
