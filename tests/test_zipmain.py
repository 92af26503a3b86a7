"""The single file's `__main__` (patcher/cli/zipmain.py) in this process, where coverage sees it: the
sentence for an older Python (as bullseye's 3.9 gets it, tests/test_pyz_old_python.py), where the
libcst directory is found, and the sentence for a libcst missing from the zip's directory."""

from __future__ import annotations

import ast
import importlib
import json
import sys
import types
from pathlib import Path

import pytest

from patcher.cli import commands, singlefile, zipmain
from patcher.core.errors import LazylogError
from patcher.core.exitcodes import ExitCode
from patcher.core.report import Report
from tests.helpers import readme_json_fields

ROOT = Path(__file__).resolve().parent.parent


def test_the_main_module_is_plain_python_3_6_syntax() -> None:
    """What an old Python parses before it can say anything: no 3.10 syntax (match, `X | Y` at run
    time need 3.10), no __future__ import that 3.6 lacks, and only stdlib imports that are everywhere."""
    tree = ast.parse((ROOT / "patcher" / "cli" / "zipmain.py").read_text(), feature_version=(3, 6))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported == {"json", "os", "sys", "importlib", "patcher"}
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [
        n for n in top if isinstance(n, ast.ImportFrom)
    ]  # patcher only inside main(), after the check


def test_the_package_it_imports_first_is_plain_python_3_6_syntax_too() -> None:
    """The too-old sentence names the command (patcher.cli.argv) and fills the JSON fields
    (patcher.core.fields): every module it imports parses on 3.6."""
    first = ("__init__.py", "cli/__init__.py", "cli/entry.py", "cli/argv.py", "cli/singlefile.py")
    for init in [ROOT / "patcher" / name for name in (*first, "core/__init__.py", "core/fields.py")]:
        tree = ast.parse(init.read_text(), feature_version=(3, 6))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "__future__"]


@pytest.mark.parametrize("as_json", [False, True])
def test_an_older_python_gets_one_sentence_and_exit_4(
    as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "version_info", (3, 9, 2, "final", 0))
    # the tool image's file, run as the image's step runs it: the sentence names it as it was run
    monkeypatch.setattr(sys, "argv", ["/mnt/torch-lazylog", "apply", *(["--json"] if as_json else [])])
    with pytest.raises(SystemExit) as exited:
        zipmain.main()
    assert exited.value.code == ExitCode.ENVIRONMENT == zipmain.ENVIRONMENT
    out, err = capsys.readouterr()
    text = json.loads(out)["message"] if as_json else err
    assert "but this is Python 3.9.2 (" in text and f"apply --torch-dir {tmp_path / 'torch'}`" in text
    assert "to run /mnt/torch-lazylog, " in text and "`python3.10 /mnt/torch-lazylog apply" in text
    if as_json:
        report = json.loads(out)
        assert (report["command"], report["exit_code"], report["state"], err) == ("apply", 4, "unknown", "")
        assert list(report) == readme_json_fields()  # the one shape, null where nothing is known
        assert report == Report("apply", "unknown", False, report["message"], ExitCode(4)).to_json(None)
    else:
        assert (
            out == ""
            and err.startswith("torch-lazylog: error: Expected Python 3.10")
            and err.count("\n") == 1
        )


def test_without_a_torch_the_sentence_names_the_directory_to_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # an import that is blocked: no torch to name
    assert zipmain._torch_dir() == ""
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # no __spec__: find_spec raises
    assert zipmain._torch_dir() == ""
    assert "apply --torch-dir DIR/torch`" in zipmain.too_old(
        "3.9.2", "/usr/bin/python3", "", "torch-lazylog.pyz"
    )


def test_the_libcst_directory_is_beside_the_file_or_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(singlefile.LIBS_VARIABLE, raising=False)
    assert singlefile.libs_dir("/mnt/x/torch-lazylog.pyz") == "/mnt/x/torch-lazylog-libs"
    monkeypatch.setenv(singlefile.LIBS_VARIABLE, "/opt/libs")
    assert singlefile.libs_dir("/mnt/x/torch-lazylog.pyz") == "/opt/libs"
    assert not singlefile.in_zip()  # this checkout's modules are files


def test_in_the_libcst_directory_this_pythons_own_is_taken_when_there_is_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tool image carries one libcst a Python (torch-lazylog-libs/3.12): the running one's is used."""
    monkeypatch.delenv(singlefile.LIBS_VARIABLE, raising=False)
    libs = tmp_path / singlefile.LIBS_NAME
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    other = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    (libs / other).mkdir(parents=True)
    assert singlefile.libs_dir(str(tmp_path / "torch-lazylog")) == str(libs)  # no dir of its own: the whole
    (libs / minor).mkdir()
    assert singlefile.libs_dir(str(tmp_path / "torch-lazylog")) == str(libs / minor)
    monkeypatch.setenv(singlefile.LIBS_VARIABLE, str(libs))
    assert singlefile.libs_dir("/elsewhere/torch-lazylog") == str(libs / minor)


def test_main_puts_an_existing_directory_last_on_the_path_and_hands_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    called = []
    monkeypatch.setattr("patcher.cli.app.main", lambda: called.append(list(sys.path)))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "torch-lazylog.pyz"), "verify"])
    monkeypatch.delenv(singlefile.LIBS_VARIABLE, raising=False)
    zipmain.main()
    assert called and str(tmp_path / singlefile.LIBS_NAME) not in called[0]
    (tmp_path / singlefile.LIBS_NAME).mkdir()
    zipmain.main()
    assert called[1][-1] == str(tmp_path / singlefile.LIBS_NAME) and called[1][:-1] == called[0]


def test_in_the_zip_a_missing_libcst_names_the_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("libcst", "patcher.core.transform", "patcher.core.canonical"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "libcst", None)
    monkeypatch.setattr(sys, "argv", ["/mnt/torch-lazylog/torch-lazylog.pyz", "apply"])
    monkeypatch.delenv(singlefile.LIBS_VARIABLE, raising=False)
    with pytest.raises(LazylogError) as raised:
        importlib.import_module("patcher.core.transform")
    assert raised.value.code == ExitCode.ENVIRONMENT
    assert raised.value.missing is not None and raised.value.missing.module == "libcst"
    # installed, the sentence is the wheel's; from the zip, the command line names the directory to mount
    assert "install the torch-lazylog wheel" in raised.value.text(commands._single_file())
    monkeypatch.setattr(singlefile, "in_zip", lambda: True)
    said = raised.value.text(commands._single_file())
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"found none for this Python ({minor} on " in said
    assert "in /mnt/torch-lazylog/torch-lazylog-libs. Nothing was written" in said
    monkeypatch.delitem(sys.modules, "libcst")
    monkeypatch.delitem(sys.modules, "patcher.core.transform", raising=False)
