"""The versions of the core distribution.

The policy: :data:`__version__` is ``mmeval-core``'s own version, the one pip,
``importlib.metadata`` and the plugins' ``mmeval-core`` pins see, and it is
kept above the MMEval release whose public API (import paths, metric names,
arguments, result keys and units) it implements as a drop-in: the 0.3 series
implements MMEval 0.2.1's API and adds to it. So the checks MMEval's users
already write (``mmeval.__version__ >= '0.2'``, ``mmeval.version.version_info >= (0, 2)``)
answer truthfully for the API they ask about. :data:`MMEVAL_API_VERSION` names
that MMEval release exactly (``0.2.1``); a check that must tell this package
from MMEval itself reads ``getattr(mmeval, "MMEVAL_API_VERSION", None)``.
"""

from typing import List, Tuple, Union

__version__ = "0.3.0"

#: The MMEval release whose API this core implements (what a check for MMEval >= 0.2 should read).
MMEVAL_API_VERSION = "0.2.1"


def parse_version_info(version_str: str) -> Tuple[Union[int, str], ...]:
    """``'0.3.0'`` as ``(0, 3, 0)``; a pre-release part kept as a string (``'1.0.0rc1'`` -> ``(1, 0, 0, 'rc1')``)."""
    parts: List[Union[int, str]] = []
    for piece in version_str.split("."):
        if piece.isdigit():
            parts.append(int(piece))
        else:
            digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
            if digits and piece.startswith(digits):
                parts += [int(digits), piece[len(digits) :]]
            else:
                parts.append(piece)
    return tuple(parts)


#: :data:`__version__` as a tuple, as MMEval's ``mmeval.version.version_info``.
version_info = parse_version_info(__version__)
