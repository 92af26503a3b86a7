"""graph.py's bytecode as the import system writes it (PEP 552), from public APIs only.

The header is the interpreter's magic number, the flags word, then either the source mtime and size
(timestamp pycs) or the source hash (checked- and unchecked-hash pycs); marshal holds the code.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import marshal
import sys

_FLAGS = {"timestamp": 0, "unchecked-hash": 1, "checked-hash": 3}


def pyc(source: bytes, dfile: str, mode: str, optimize: int, mtime: int) -> bytes:
    code = compile(source, dfile, "exec", dont_inherit=True, optimize=optimize)
    flags = _FLAGS[mode]
    if flags == 0:
        check = (mtime & 0xFFFFFFFF).to_bytes(4, "little") + (len(source) & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        check = importlib.util.source_hash(source)
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + check + marshal.dumps(code)


def answer(request: dict[str, object]) -> dict[str, object]:
    """{"data": b64 source, "dfile", "mtime", "pycs": [{"mode", "optimize"}]} -> the pycs, in order."""
    data = base64.b64decode(str(request["data"]))
    items = request["pycs"]
    assert isinstance(items, list)
    mtime = request["mtime"]
    assert isinstance(mtime, int)
    built = [pyc(data, str(request["dfile"]), item["mode"], item["optimize"], mtime) for item in items]
    return {"pycs": [base64.b64encode(item).decode("ascii") for item in built]}


if __name__ == "__main__":
    json.dump(answer(json.load(sys.stdin)), sys.stdout)
