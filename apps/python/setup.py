"""Builds kvferry's native module through the repository's CMake build.

pyproject.toml holds the metadata and the sglang.srt.plugins entry point; this
file only adds the build step: configure the repository (two folders up) with
the interpreter that runs the build, build the target kvferry_python_native,
and put the _native module beside the package's modules in the wheel. Needs a
checkout of the repository (not an sdist) and what deploy/install-deps.sh
installs (CMake, a C++20 compiler, CAF, spdlog, pybind11-dev, python3-dev).

Environment:
  KVFERRY_CMAKE_BUILD_DIR   build folder to use (default: <repo>/build-pip);
                            an existing configured one (make build's build/)
                            is reused and only brought up to date
  KVFERRY_CMAKE_BUILD_TYPE  CMAKE_BUILD_TYPE of a new folder (RelWithDebInfo)
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: the CPU count)
"""

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGET = "kvferry_python_native"


class CMakeBuild(build_ext):
    """Builds kvferry._native with the repository's CMake, not distutils."""

    def build_extension(self, ext):
        if not (REPO / "CMakeLists.txt").is_file():
            sys.exit(f"kvferry: {REPO} is not a kvferry checkout (no CMakeLists.txt): "
                     "install from the repository's apps/python")
        build_dir = Path(os.environ.get("KVFERRY_CMAKE_BUILD_DIR") or REPO / "build-pip")
        if not build_dir.is_absolute():
            build_dir = REPO / build_dir
        if not (build_dir / "CMakeCache.txt").is_file():
            build_type = os.environ.get("KVFERRY_CMAKE_BUILD_TYPE", "RelWithDebInfo")
            self._run(["cmake", "-S", str(REPO), "-B", str(build_dir),
                       f"-DCMAKE_BUILD_TYPE={build_type}",
                       f"-DPython3_EXECUTABLE={sys.executable}",
                       "-DBUILD_TESTING=OFF"])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        self._run(["cmake", "--build", str(build_dir), "--target", TARGET, "-j", jobs])
        built = sorted(glob.glob(str(build_dir / "python" / "kvferry" / "_native*.so")))
        if not built:
            sys.exit(f"kvferry: the build left no _native*.so in {build_dir}/python/kvferry "
                     "(python3-dev and pybind11-dev installed? see deploy/install-deps.sh)")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], dest)

    def _run(self, cmd):
        print("kvferry:", " ".join(cmd), flush=True)
        subprocess.check_call(cmd)


# setuptools' own folders go under build-pip/ too (ignored by git), not apps/python.
SCRATCH = REPO / "build-pip" / "setuptools"
SCRATCH.mkdir(parents=True, exist_ok=True)

setup(ext_modules=[Extension("kvferry._native", sources=[])],
      cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": str(SCRATCH / "build")},
               "egg_info": {"egg_base": os.path.relpath(SCRATCH, HERE)}})
