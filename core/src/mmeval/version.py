"""The versions of the core distribution.

The policy: :data:`__version__` is ``mmeval-core``'s own version, the one pip,
``importlib.metadata`` and the plugins' ``mmeval-core`` pins see; it follows
this project's releases. :data:`MMEVAL_API_VERSION` is the MMEval release
whose public API (import paths, metric names, arguments, result keys and
units) this core implements as a drop-in. A compatibility check written for
MMEval reads ``getattr(mmeval, "MMEVAL_API_VERSION", mmeval.__version__)``:
here it answers ``0.2.1``; on MMEval itself, which has no such attribute,
MMEval's own version. ``mmeval.__version__`` never claims to be an MMEval
release it is not.
"""

__version__ = "0.1.0"

#: The MMEval release whose API this core implements (what a check for MMEval >= 0.2 should read).
MMEVAL_API_VERSION = "0.2.1"
