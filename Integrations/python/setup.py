# pip builds a local folder in place, and setuptools would leave build/ and
# keyring_kc.egg-info in it: in the checkout, root's after a `sudo pip install`. Both go
# to a temporary folder instead, removed when the build ends. (pyproject.toml holds the
# package's description; this file only moves setuptools' scratch space.)
import atexit
import shutil
import tempfile

from setuptools import setup

scratch = tempfile.mkdtemp(prefix="keyring-kc-build.")
atexit.register(shutil.rmtree, scratch, True)
setup(options={"egg_info": {"egg_base": scratch}, "build": {"build_base": scratch + "/build"}})
