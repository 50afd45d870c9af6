"""The installed package is self-contained: one abi3 extension that needs no
libtolk and no libcjson on the system, and exports only its init function."""
import os
import shutil
import subprocess
import zipfile

import pytest

import tolk
from tolk import _tolk


def test_extension_is_abi3_and_self_contained():
    assert _tolk.__file__.endswith(".abi3.so")
    if not shutil.which("readelf"):
        pytest.skip("no readelf")
    dyn = subprocess.run(["readelf", "-d", _tolk.__file__], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    assert not [n for n in needed if "tolk" in n or "cjson" in n], needed
    syms = subprocess.run(["readelf", "--dyn-syms", "-W", _tolk.__file__], capture_output=True, text=True,
                          check=True).stdout
    exported = {line.split()[-1] for line in syms.splitlines()
                if " GLOBAL " in line and " UND " not in line and " DEFAULT " in line}
    assert exported == {"PyInit__tolk"}, sorted(exported)[:10]


def test_wheel_tag_and_contents():
    wheel = os.environ.get("TOLK_WHEEL")
    if not wheel:
        pytest.skip("TOLK_WHEEL not set (python/test.sh sets it)")
    assert os.path.basename(wheel).endswith("-cp311-abi3-linux_x86_64.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"tolk/__init__.py", "tolk/_tolk.abi3.so", "tolk/_tolk.pyi", "tolk/py.typed"} <= names
    assert tolk.__version__ == "0.1.0"
