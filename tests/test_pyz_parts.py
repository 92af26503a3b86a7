"""The parts of the single-file build that run inside the zip, exercised in this process (where
coverage sees them): the definitions read from a zip through importlib.resources, a module with no
file run in another interpreter from its source, and the sentences for an absent click or libcst."""

from __future__ import annotations

import importlib
import json
import sys
import zipfile
from pathlib import Path

import pytest

from patcher.cli import zipmain
from patcher.core import spec
from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.install import interpreter

ROOT = Path(__file__).resolve().parent.parent


def _zipped_package(tmp_path: Path, files: dict[str, str]) -> Path:
    archive = tmp_path / "packed.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name, text in files.items():
            out.writestr(name, text)
    return archive


def test_the_definitions_are_read_from_a_zip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """patcher.patches packed in a zip: no directory to read from, so importlib.resources reads them."""
    definitions = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "patches").glob("*.json")}
    archive = _zipped_package(
        tmp_path,
        {"patcher/patches/__init__.py": "", **{f"patcher/patches/{k}": v for k, v in definitions.items()}},
    )
    for name in [m for m in sys.modules if m == "patcher.patches"]:
        monkeypatch.delitem(sys.modules, name)
    import patcher

    monkeypatch.setattr(patcher, "__path__", [*patcher.__path__, f"{archive}/patcher"])
    monkeypatch.delattr(patcher, "patches", raising=False)
    packed = importlib.import_module("patcher.patches")
    assert str(archive) in (packed.__file__ or "") and not Path(packed.__file__ or "").parent.is_dir()
    from patcher.install import definitions as loader

    loaded = loader.load()
    assert loaded.releases.rows and loaded.id == json.loads(definitions[spec.PATCH_NAME])["id"]


def test_a_module_without_a_file_runs_in_another_interpreter_from_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _zipped_package(
        tmp_path,
        {
            "zipped_probe.py": "import sys\nif __name__ == '__main__':\n    print('from', __name__, sys.stdin.read())\n"
        },
    )
    monkeypatch.syspath_prepend(str(archive))
    module = importlib.import_module("zipped_probe")
    try:
        assert not Path(module.__file__ or "").is_file()
        done = interpreter.run_module(sys.executable, module, "say hello", "a b", 300, None)
        assert (done.returncode, done.stdout) == (0, "from __main__ a b\n"), done.stderr
    finally:
        del sys.modules["zipped_probe"]


def test_without_libcst_the_parse_is_an_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("libcst", "patcher.core.transform", "patcher.core.canonical"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "libcst", None)  # `import libcst` now fails as where it is absent
    with pytest.raises(LazylogError) as raised:
        importlib.import_module("patcher.core.transform")
    assert raised.value.code == ExitCode.ENVIRONMENT
    assert raised.value.message.startswith("Expected libcst to read a graph.py that is not a known release's")
    monkeypatch.delitem(sys.modules, "libcst")
    monkeypatch.delitem(sys.modules, "patcher.core.transform", raising=False)


@pytest.mark.parametrize("as_json", [False, True])
def test_without_click_the_single_file_says_so(
    as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        sys, "argv", ["torch-lazylog.pyz", "verify", "--runtime", *(["--json"] if as_json else [])]
    )
    monkeypatch.setitem(sys.modules, "click", None)  # `import click` now fails as where it is absent
    monkeypatch.delitem(sys.modules, "patcher.cli.app")
    with pytest.raises(SystemExit) as exited:
        zipmain.main()
    assert exited.value.code == 4
    out, err = capsys.readouterr()
    text = json.loads(out)["message"] if as_json else err
    assert "Expected click to parse `verify --runtime" in text and "install the torch-lazylog wheel" in text
    if as_json:
        assert json.loads(out)["command"] == "verify" and err == ""


@pytest.mark.parametrize(
    ("files", "why"),
    [
        (["click-8.dist-info/METADATA", "click-8.dist-info/licenses/LICENSE.txt"], "not installed as files"),
        (["click/__init__.py", "click-8.dist-info/METADATA"], "has no license file"),
    ],
    ids=["no-package-files", "no-license"],
)
def test_the_build_refuses_a_click_it_cannot_copy_with_its_license(
    files: list[str], why: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from importlib import metadata
    from types import SimpleNamespace

    from patcher import pyz

    found = SimpleNamespace(files=[metadata.PackagePath(f) for f in files])
    monkeypatch.setattr(metadata, "distribution", lambda name: found)
    with pytest.raises(SystemExit, match=why):
        pyz._vendor("click", tmp_path)
    assert not any(tmp_path.iterdir())  # refused before copying anything


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["-o", "x.pyz"], ["a.pyz", "b.pyz"], ["--out=x.pyz"]])
def test_the_build_command_never_writes_a_file_named_after_an_option(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python3 -m patcher.pyz --help` prints its usage; an option or a second path is a usage error
    (exit 2); neither writes anything."""
    from patcher import pyz

    monkeypatch.chdir(tmp_path)
    code = pyz.main(argv)
    out, err = capsys.readouterr()
    assert list(tmp_path.iterdir()) == []
    if argv[0] in ("--help", "-h"):
        assert (code, err) == (0, "") and out.startswith("usage: python3 -m patcher.pyz [OUT]\n")
    else:
        assert code == 2 and out == "" and err.endswith("nothing was written\n"), err
