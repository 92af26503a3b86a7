"""The state function and the command tables on synthetic bytes: no wheels, no files, milliseconds.

A two-release table is made from a small graph.py of the real shape (an eager release 9.0.0 and a
release 9.1.0 that ships the fix); snapshots are built in memory and read by patcher.facts, so each
state and each command's plan is checked from the bytes alone.
"""

from __future__ import annotations

import functools
import platform
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from patcher import facts, fsio, plan, record, state
from patcher import spec as spec_module
from patcher.classify import classify, decide
from patcher.errors import ExitCode
from patcher.fingerprint import build_releases
from patcher.hashes import sha256
from patcher.interpreter import Interpreter
from patcher.locate import Target
from patcher.snapshot import FileStat, Snapshot
from patcher.spec import PatchSpec
from patcher.undo import UndoRecord
from tests.helpers import cache_tag

EAGER = b"error.operator_str(target, args, kwargs),"
LAZY = b"LazyString(error.operator_str, target, args, kwargs),"
SOURCE = b"""from torch._logging import LazyString, trace_structured


class GraphLowering:
    def call_function(self, target, args, kwargs):
        if target not in lowerings:
            if base_name in FALLBACK_ALLOW_LIST:
                make_fallback(target)
            elif config.implicit_fallbacks:
                error = MissingOperatorWithDecomp if get_decompositions([target]) else MissingOperatorWithoutDecomp
                log.info(
                    "Creating implicit fallback for:\\n%s",
                    error.operator_str(target, args, kwargs),
                )
"""
NATIVE = SOURCE.replace(EAGER, LAZY) + b"# ships the fix\n"
VENDOR = b"# a vendor's edit\n" + SOURCE
ROW = "torch/_inductor/graph.py"
UNDO_ROW = "torch-9.0.0.dist-info/torch_lazylog.json"
STAT = FileStat(0o644, 0, 0, 1_000_000_000)
NOW = 2_000_000_000_000_000_000


@functools.cache
def _spec() -> PatchSpec:
    real = spec_module.load()
    return real._replace(releases=build_releases([("9.0.0", SOURCE), ("9.1.0", NATIVE)], real))


def _record(graph: bytes, *extra: str) -> bytes:
    rows = [
        f"torch/__init__.py,{record.hash_field('sha256', b'')},0",
        f"{ROW},{record.hash_field('sha256', graph)},{len(graph)}",
    ]
    return ("\r\n".join([*rows, *extra]) + "\r\n").encode()


def _target() -> Target:
    site = Path("/nonexistent/site-packages")
    python = Interpreter("/nonexistent/python", platform.python_version(), cache_tag(), None, True)
    dist = site / "torch-9.0.0.dist-info"
    return Target(
        python, site / "torch", site / "torch/_inductor/graph.py", dist, dist / "torch_lazylog.json", "9.0.0"
    )


def _snap(graph: bytes, rec: bytes | None, undo: bytes | None = None) -> Snapshot:
    parsed = None
    if undo is not None:
        try:
            parsed = UndoRecord.parse(undo, _spec().id, ROW, "torch-9.0.0.dist-info/RECORD")
        except ValueError:
            parsed = None
    return Snapshot(graph, STAT, rec, STAT if rec is not None else None, parsed, undo, (), None, None, ())


def _read(snap: Snapshot) -> facts.Reading:
    return facts.read(snap, _spec(), classify(snap.graph, _spec(), "9.0.0"), UNDO_ROW, NOW)


def _apply(snap: Snapshot) -> tuple[facts.Reading, plan.Plan]:
    known, rewritten = decide(snap.graph, _spec(), "9.0.0")
    reading = facts.read(snap, _spec(), known, UNDO_ROW, NOW)
    return reading, plan.build(
        _target(), _spec(), snap, reading, state.APPLY[reading.state].does, 2_000_000_000, rewritten
    )


def _writes(planned: plan.Plan) -> dict[str, bytes | None]:
    """Destination name -> new bytes (None: removed)."""
    out: dict[str, bytes | None] = {}
    for step in planned.steps:
        if isinstance(step, fsio.Write):
            out[step.path.name] = step.data
        elif isinstance(step, fsio.Remove):
            out[step.path.name] = None
    return out


def _applied(graph: bytes = SOURCE) -> tuple[bytes, bytes, bytes]:
    """graph.py, RECORD and the undo record after apply on a pristine tree."""
    _, planned = _apply(_snap(graph, _record(graph)))
    writes = _writes(planned)
    new_graph, new_record, undo = writes["graph.py"], writes["RECORD"], writes["torch_lazylog.json"]
    assert new_graph is not None and new_record is not None and undo is not None
    return new_graph, new_record, undo


def test_every_table_names_every_state() -> None:
    states = set(typing.get_args(state.State))
    for name, table in state.TABLES.items():
        assert set(table) == states, name
    assert {
        state.decide(state.Facts(b, f, "current", False, False, False, 0)) for b, f in state._BY_BASE_AND_FIT
    } == states - {"apply-interrupted", "revert-interrupted"}


def _one_edit_record(lazy: bytes) -> bytes:
    """A record whose claims are self-consistent (after = the file, before = it with the one edit
    undone) beside an exact release that ships the fix: no release ever had that `before`."""
    from patcher.edits import line_edit
    from patcher.undo import FileChange, FileState

    eager = lazy.replace(LAZY, EAGER)
    change = FileChange(
        ROW,
        FileState(sha256(eager), len(eager)),
        FileState(sha256(lazy), len(lazy)),
        line_edit(eager, lazy),
        0o644,
        0,
    )
    return UndoRecord(_spec().id, "9.1.0", "exact", change, None).to_bytes()


def _cases() -> list[tuple[str, Snapshot]]:
    patched, rec, undo = _applied()
    vendor_patched, vendor_rec, vendor_undo = _applied(VENDOR)
    other_undo = _applied(VENDOR)[2]
    vendor_lazy = VENDOR.replace(EAGER, LAZY)
    return [
        ("pristine", _snap(SOURCE, _record(SOURCE))),
        ("pristine", _snap(SOURCE, None)),  # no RECORD: the spec allows it
        ("patched", _snap(patched, rec, undo)),
        ("patched", _snap(vendor_patched, vendor_rec, vendor_undo)),
        ("apply-interrupted", _snap(patched, _record(SOURCE), undo)),
        ("ships-lazy", _snap(NATIVE, _record(NATIVE))),
        ("ships-lazy", _snap(vendor_lazy, _record(vendor_lazy))),  # a vendor cherry-pick of the fix
        ("record-only", _snap(SOURCE, _record(SOURCE), undo)),
        ("revert-interrupted", _snap(SOURCE, _record(patched, UNDO_ROW), undo)),
        ("unrecorded", _snap(patched, rec)),
        ("unrecorded", _snap(vendor_patched, _record(VENDOR))),  # RECORD still names the original
        ("reinstalled", _snap(SOURCE, _record(SOURCE), other_undo)),
        ("upgraded", _snap(NATIVE, _record(NATIVE), undo)),
        (
            "untrusted-eager",
            _snap(SOURCE, _record(SOURCE), undo.replace(sha256(patched).encode(), sha256(SOURCE).encode())),
        ),
        ("untrusted-patched", _snap(patched, rec, b"{not json")),
        ("untrusted-lazy", _snap(NATIVE, _record(NATIVE), b"[]")),
        ("edited", _snap(vendor_patched + b"# edited\n", vendor_rec, vendor_undo)),
        ("unknown", _snap(b"x = 1\n", _record(b"x = 1\n"))),
        ("unknown", _snap(b"x = 1\n", _record(b"x = 1\n"), b"{not json")),  # proves nothing
        ("reinstalled", _snap(b"# another build\n" + SOURCE, _record(SOURCE), vendor_undo)),  # eager site
        ("untrusted-lazy", _snap(NATIVE, _record(NATIVE), _one_edit_record(NATIVE))),
        ("untrusted-patched", _snap(patched, rec, b"[" * 100_000)),  # nested past the parser's depth
    ]


@pytest.mark.parametrize(
    ("expected", "snap"), _cases(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(_cases())]
)
def test_each_state_is_named_from_the_bytes(expected: str, snap: Snapshot) -> None:
    assert _read(snap).state == expected


def test_the_cases_cover_every_state() -> None:
    assert {name for name, _ in _cases()} == set(typing.get_args(state.State))


def test_apply_on_pristine_makes_exactly_the_one_edit_and_a_true_record() -> None:
    patched, rec, undo = _applied()
    assert patched == SOURCE.replace(EAGER, LAZY)
    assert record.names(rec, ROW, patched) and record.rows(rec, UNDO_ROW)
    assert rec.count(b"\r\n") == _record(SOURCE).count(b"\r\n") + 1  # CRLF kept, one row added
    assert UndoRecord.parse(
        undo, _spec().id, ROW, "torch-9.0.0.dist-info/RECORD"
    ).graph.before.sha256 == sha256(SOURCE)


def _revert(snap: Snapshot) -> dict[str, bytes | None]:
    reading = _read(snap)
    return _writes(plan.build(_target(), _spec(), snap, reading, state.REVERT[reading.state].does, 0))


def test_revert_restores_rows_wherever_record_moved_them() -> None:
    patched, rec, undo = _applied()
    grown = rec.replace(b"\r\n", b"\n") + b"torch/extra.py,,\n"  # normalised line endings, a row added
    writes = _revert(_snap(patched, grown, undo))
    restored = writes["RECORD"]
    assert writes["graph.py"] == SOURCE and writes["torch_lazylog.json"] is None
    assert (
        restored is not None and record.names(restored, ROW, SOURCE) and not record.rows(restored, UNDO_ROW)
    )
    assert b"torch/extra.py,," in restored


def test_revert_of_a_lost_record_restores_the_release_bytes() -> None:
    patched, rec, _ = _applied()
    writes = _revert(_snap(patched, rec))
    assert writes["graph.py"] == SOURCE and writes["RECORD"] == _record(SOURCE)


@pytest.mark.parametrize("name", ["ships-lazy", "pristine"])
def test_revert_never_writes_what_the_tool_did_not_make(name: str) -> None:
    snap = dict((n, s) for n, s in reversed(_cases()))[name]
    assert _revert(snap) == {}


def test_a_record_that_claims_a_pristine_file_is_patched_is_not_believed() -> None:
    patched, _, undo = _applied()
    forged = undo.replace(sha256(patched).encode(), sha256(SOURCE).encode())
    snap = _snap(SOURCE, _record(SOURCE), forged)
    assert state.verdict(_read(snap).state, ()).code == ExitCode.EAGER
    assert _revert(snap) == {"torch_lazylog.json": None}  # the forged record goes; graph.py stays


def test_verify_never_fails_a_lazy_state_and_never_passes_an_eager_one() -> None:
    for name in typing.get_args(state.State):
        rule = state.VERIFY[name]
        if name in ("edited", "unknown"):
            assert rule.code == ExitCode.REFUSED
        else:
            assert (rule.code == ExitCode.OK) == (name in state.LAZY), name


def test_record_rows_in_every_form_the_spec_allows() -> None:
    import hashlib

    assert hashlib.algorithms_guaranteed - record.GUARANTEED == {"shake_128", "shake_256"}
    data = b"graph\n"
    for algorithm in sorted(record.GUARANTEED):
        field = record.hash_field(algorithm, data)
        assert field.startswith(f"{algorithm}=") and record.describes(field, data)
        assert not record.describes(field, data + b"x")
        assert record.fit(f"{ROW},{field},\n".encode(), ROW, data) == "current"  # an empty size
    quoted = f'"{ROW}","{record.hash_field("sha256", data)}","{len(data)}"\r\n'.encode()
    assert record.fit(quoted, ROW, data) == "current"
    assert record.fit(f"{ROW},,\n".encode(), ROW, data) == "unhashed"
    for odd in ("shake_128=abc", "sha512_256=abc", "foo=abc"):  # rows no hashlib reads the same
        assert record.fit(f"{ROW},{odd},3\n".encode(), ROW, data) == "other"
        assert (
            record.pointed(f"{ROW},{odd},3\n".encode(), ROW, data)
            == f"{ROW},{record.hash_field('sha256', data)},{len(data)}\n".encode()
        )
    moved = record.pointed(f"{ROW},{record.hash_field('sha512', b'old')},3\n".encode(), ROW, data)
    assert moved == f"{ROW},{record.hash_field('sha512', data)},{len(data)}\n".encode()  # its algorithm kept


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["graph"].update(before={"sha256": "x" * 64, "size": 1}),
        lambda d: d["graph"].update(after={"sha256": "0" * 64, "size": -1}),
        lambda d: d["graph"].update(after="not an object"),
        lambda d: d["graph"].update(mode="644"),
        lambda d: d["graph"].update(mtime_ns=True),
        lambda d: d["graph"].update(path="../graph.py"),
        lambda d: d.update(graph=[]),
        lambda d: d.update(release=7),
        lambda d: d.update(patch="another-patch"),
        lambda d: d["graph"]["edit"].update(new="x" * 99),  # sizes no longer add up
    ],
    ids=["hash", "size", "state", "mode", "mtime", "path", "graph", "release", "patch", "sizes"],
)
def test_an_undo_record_of_the_wrong_shape_proves_nothing(damage: Callable[[dict[str, Any]], None]) -> None:
    import json

    patched, rec, undo = _applied()
    data = json.loads(undo)
    damage(data)
    assert _read(_snap(patched, rec, json.dumps(data).encode())).state == "untrusted-patched"


def test_an_exact_release_whose_one_edit_does_not_give_the_table_is_unknown() -> None:
    """A release's bytes patched by the one edit must give the table's patched sha256."""
    spec = _spec()
    row = spec.releases.rows[0]
    wrong = spec._replace(
        releases=spec.releases._replace(rows=(row._replace(patched_sha256="0" * 64), *spec.releases.rows[1:]))
    )
    known, rewritten = decide(SOURCE, wrong, "9.0.0")
    assert (known.state, rewritten) == ("unknown", None) and "known patched bytes" in known.reason
    doubled = SOURCE + b"# error.operator_str(target, args, kwargs),\n"
    assert decide(doubled, spec, "9.0.0")[0].state == "unknown"


def test_the_reinstall_advice_uses_the_tool_that_installed_torch() -> None:
    from patcher.messages import Layout, reinstall

    assert (
        reinstall("/v/bin/python", "2.10.0", False)
        == "/v/bin/python -m pip install --force-reinstall --no-deps torch==2.10.0"
    )
    assert reinstall("/usr/bin/python3", "2.10.0", False, "uv", Layout(uv=True)) == (
        "uv pip install --python /usr/bin/python3 --reinstall --no-deps torch==2.10.0"
    )  # where uv is on PATH (tests/test_reinstall_advice.py has every layout)
    assert "not on the public package index" in reinstall("/v/bin/python", "2.10.0+rocm7.2.4", True)
    assert "add --python" in reinstall(None, "2.10.0", False)
