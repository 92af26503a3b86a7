"""What the target interpreter is, and where its `import torch` would come from (without importing it)."""

from __future__ import annotations

import importlib.util
import json
import sys


def info(find_torch: bool) -> dict[str, str | None]:
    found: dict[str, str | None] = {
        "executable": sys.executable,
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "cache_tag": sys.implementation.cache_tag,
        "magic": importlib.util.MAGIC_NUMBER.hex(),
        "pycache_prefix": sys.pycache_prefix,
        "torch_dir": None,
        "error": None,
    }
    if find_torch:
        try:
            spec = importlib.util.find_spec("torch")  # a top-level package: found, not executed
        except Exception as exc:  # a broken path hook or .pth: report it, do not crash
            found["error"] = f"{type(exc).__name__}: {exc}"
        else:
            if spec is not None and spec.submodule_search_locations:
                found["torch_dir"] = next(iter(spec.submodule_search_locations))
    return found


if __name__ == "__main__":
    print(json.dumps(info(sys.argv[1:] == ["--find-torch"])))
