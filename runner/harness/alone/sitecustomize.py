"""Imported by every Python process of a task whose packages are its whole environment (``[environment]
platform = false``; a bare MLAgentBench folder's): PYTHONPATH puts this folder first. The interpreter's own
site-packages (the platform's) leave the module path, with the import hooks their .pth files added, so the task's
code imports its packages and the standard library only, as in the environment it was made for."""

import site
import sys

_PLATFORM = {*site.getsitepackages(), site.getusersitepackages()}
_HOOKS = ("__editable__", "_distutils_hack")  # an editable install's finder; setuptools' distutils shim
sys.path[:] = [path for path in sys.path if path not in _PLATFORM]
sys.meta_path[:] = [hook for hook in sys.meta_path if not getattr(hook, "__module__", "").startswith(_HOOKS)]
sys.path_hooks[:] = [hook for hook in sys.path_hooks if not getattr(hook, "__module__", "").startswith(_HOOKS)]
sys.path_importer_cache.clear()
