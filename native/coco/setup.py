"""The C extension (setuptools builds it; pyproject.toml holds the metadata)."""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):  # type: ignore[misc]
    """No fused multiply-adds, whatever the compiler: the same floats as numpy's separate operations."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "msvc":
            flags = ["/O2", "/fp:precise"]  # MSVC contracts only under /fp:contract
        else:
            flags = ["-O2", "-ffp-contract=off"]  # gcc and clang contract on aarch64 by default
        for ext in self.extensions:
            ext.extra_compile_args = flags
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "mmeval_coco_native._kernels",
            sources=[
                "src/mmeval_coco_native/_kernels.c",
                "src/mmeval_coco_native/_blocks.c",
                "src/mmeval_coco_native/_plain.c",
            ],
            depends=["src/mmeval_coco_native/_blocks.h", "src/mmeval_coco_native/_plain.h"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
