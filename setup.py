"""Builds libdlshim.so with the project's Makefile while the package is
built, and puts it (and the shell launcher) inside the package: the rest of
the metadata is in pyproject.toml."""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithMake(build_py):
    def run(self):
        super().run()
        build = os.path.abspath(os.path.join(HERE, "build", "pip"))
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["make", "-C", HERE, f"-j{jobs}", f"BUILD={build}", f"{build}/libdlshim.so"],
                       check=True)
        target = os.path.join(self.build_lib, "dlshim")
        os.makedirs(target, exist_ok=True)
        shutil.copy2(os.path.join(build, "libdlshim.so"), os.path.join(target, "libdlshim.so"))
        # The Vulkan layer's manifest, beside the library it names.
        os.makedirs(os.path.join(target, "vulkan"), exist_ok=True)
        shutil.copy2(os.path.join(HERE, "hooks", "vulkan_layer.json"),
                     os.path.join(target, "vulkan", "dlshim_layer.json"))
        shutil.copy2(os.path.join(HERE, "bin", "dlshim"), os.path.join(target, "launcher.sh"))


class AnyPythonWheel(bdist_wheel):
    """The library is preloaded, never imported: one wheel serves every
    CPython (py3-none), for this platform (auditwheel then names the oldest
    glibc it runs on: manylinux_2_17)."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: it is for this platform only."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithMake, "bdist_wheel": AnyPythonWheel},
      distclass=BinaryDistribution)
