"""Versions of the core distribution and of the plugin API it implements."""

__version__ = "0.1.0"

#: Version of the backend plugin contract (BaseDistBackend, FramedDistBackend
#: primitives, the entry-point groups). A plugin built for API 1.x works with
#: any mmeval-core implementing 1.y, y >= x.
PLUGIN_API_VERSION = "1.0"
