"""The field libraries some metrics need, imported when the metric needs them.

The core's own dependencies stay numpy, pluggy and packaging: a metric that needs pycocotools,
scipy, opencv, shapely or nltk calls :func:`import_extra` where it uses the library, and a user without it
gets a :class:`~mmeval.core.errors.MissingExtraError` that names the metric, the module and the
``mmeval-core`` extra that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict, Tuple

from mmeval.core.errors import MissingExtraError

#: importable module -> (the extra of mmeval-core that installs it, the distribution it comes from)
EXTRAS: Dict[str, Tuple[str, str]] = {
    "pycocotools": ("coco", "pycocotools"),
    "scipy": ("scipy", "scipy"),
    "cv2": ("opencv", "opencv-python-headless"),
    "shapely": ("shapely", "shapely"),
    "nltk": ("text", "nltk"),
    "matplotlib": ("plot", "matplotlib"),
}


def import_extra(module: str, user: str) -> ModuleType:
    """Import ``module`` (or a submodule of it, ``'scipy.ndimage'``) for ``user`` (the metric's name).

    Raises :class:`MissingExtraError` naming ``user``, the module and the extra to install when it
    cannot be imported (a library listed in :data:`EXTRAS`, or any other named by its top-level module).
    """
    top = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra, dist = EXTRAS.get(top, (None, top))
        how = f"pip install 'mmeval-core[{extra}]'" if extra else f"pip install {dist}"
        raise MissingExtraError(
            f"{user} needs {module!r} (distribution {dist!r}), which cannot be imported here ({exc}); install it: {how}"
        ) from exc
