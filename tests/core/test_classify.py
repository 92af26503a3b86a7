"""patcher.core.classify: what a graph.py is (by hash, else by site), the nearest release, apply's decision."""

from __future__ import annotations

import pytest

from patcher.core import classify as classify_module
from patcher.core.classify import Known, base_version, by_hash, classify
from patcher.core.outcome import Rewritten
from patcher.core.spec import PatchSpec
from patcher.core.undo import UndoRecord
from patcher.install.fingerprint import build_releases
from tests.core import world
from tests.core.world import EAGER, LAZY, NATIVE, PATCHED, SOURCE, VENDOR, sha

RECODED = SOURCE.replace(b"get_decompositions([target])", b"get_decompositions([target, 1])")


def known_of(source: bytes, spec: PatchSpec, version: str | None, undo: UndoRecord | None = None) -> Known:
    return classify(source, sha(source), spec, version, undo)[0]


@pytest.fixture(scope="module")
def three(spec: PatchSpec) -> PatchSpec:
    """9.0.0 and 9.0.1 share graph.py (as 2.12.0 and 2.12.1 do); 9.1.0 ships the fix."""
    rows = build_releases([("9.0.1", SOURCE), ("9.0.0", SOURCE), ("9.1.0", NATIVE)], spec)
    return spec._replace(releases=rows)


@pytest.mark.parametrize(
    ("version", "base"),
    [
        ("2.10.0+cu128", "2.10.0"),
        ("2.10.0+rocm7.1", "2.10.0"),
        ("2.10.0+git8514f05", "2.10.0"),
        ("2.10.0", "2.10.0"),
        (None, ""),
        ("", ""),
    ],
)
def test_base_version(version: str | None, base: str) -> None:
    assert base_version(version) == base


@pytest.mark.parametrize(
    ("version", "nearest"),
    [
        ("9.0.0+cu128", "9.0.0"),
        ("9.0.0+rocm7.1", "9.0.0"),
        ("9.0.1+git8514f05", "9.0.1"),
        ("9.0.1", "9.0.1"),
        (None, "9.0.1"),  # no version: the newest release with these bytes
        ("8.0.0", "9.0.1"),
        ("9.0.0a0+git1", "9.0.1"),  # a pre-release label is no release of the table
    ],
)
def test_release_matching_with_local_version_suffixes(
    three: PatchSpec, version: str | None, nearest: str
) -> None:
    hit = by_hash(sha(SOURCE), three, version)
    assert hit is not None and hit.release is not None
    assert (hit.kind, hit.release.version, hit.match) == ("eager", nearest, "exact")
    known = known_of(SOURCE, three, version)
    assert known.release == hit.release and known.reason == "" and known.nearest_diff == ""


def test_by_hash(spec: PatchSpec) -> None:
    for source, state, version in [
        (SOURCE, "eager", "9.0.0"),
        (PATCHED, "patched", "9.0.0"),
        (NATIVE, "native", "9.1.0"),
    ]:
        hit = by_hash(sha(source), spec, "9.1.0+cu128")
        assert hit is not None and hit.release is not None
        assert (hit.kind, hit.release.version, hit.match) == (state, version, "exact")
        assert hit.release.sha256 == sha(SOURCE if state != "native" else NATIVE)
    assert by_hash(sha(VENDOR), spec, "9.0.0") is None


@pytest.mark.parametrize(
    ("source", "version", "state", "release"),
    [
        (VENDOR, "9.0.0+cu128", "eager", "9.0.0"),
        # a lazy branch the way a release ships it, and the way patching 9.0.0 gives it: a 9.0.0
        # build is named by its own version, any other by the release that ships the branch; which
        # of the two it is, classify does not say ("lazy"): only this tool's traces tell (facts)
        (VENDOR.replace(EAGER, LAZY), "9.0.0+cu128", "lazy", "9.0.0"),
        (VENDOR.replace(EAGER, LAZY), "9.1.0+rocm", "lazy", "9.1.0"),
        (VENDOR.replace(EAGER, LAZY), None, "lazy", "9.1.0"),
        (VENDOR.replace(EAGER, LAZY), "8.0.0", "lazy", "9.1.0"),
    ],
)
def test_classify_by_site(
    spec: PatchSpec, source: bytes, version: str | None, state: str, release: str
) -> None:
    known = known_of(source, spec, version)
    assert known.release is not None
    assert (known.kind, known.release.version, known.match, known.reason, known.nearest_diff) == (
        state,
        release,
        "site",
        "",
        "",
    )


def test_a_lazy_branch_no_release_ships_is_known_by_the_release_it_patches(spec: PatchSpec) -> None:
    only_eager = spec._replace(releases=build_releases([("9.0.0", SOURCE)], spec))
    known = known_of(VENDOR.replace(EAGER, LAZY), only_eager, "9.0.0")
    assert known.release is not None and (known.kind, known.release.version, known.match) == (
        "lazy",
        "9.0.0",
        "site",
    )


DIFF = """The branch differs from the nearest release, {v}:
--- torch {v} (nearest release)
+++ installed torch{installed}
@@ -1,3 +1,3 @@
 if config.implicit_fallbacks:
-    error = MissingOperatorWithDecomp if get_decompositions([target]) else MissingOperatorWithoutDecomp
+    error = MissingOperatorWithDecomp if get_decompositions([target, 1]) else MissingOperatorWithoutDecomp
     log.info("""


@pytest.mark.parametrize(
    ("source", "version", "nearest", "installed"),
    [
        (RECODED, "9.0.0+rocm7.1", "9.0.0", " 9.0.0+rocm7.1"),
        (RECODED, None, "9.0.0", ""),
        (RECODED.replace(EAGER, LAZY), None, "9.1.0", ""),  # 9.0.0 patched and 9.1.0 share the branch
        (RECODED.replace(EAGER, LAZY), "9.0.0+cu128", "9.0.0", " 9.0.0+cu128"),  # the same version wins
    ],
)
def test_an_unknown_branch_is_shown_against_the_nearest_release(
    spec: PatchSpec, source: bytes, version: str | None, nearest: str, installed: str
) -> None:
    known = known_of(source, spec, version)
    assert (known.kind, known.release, known.match) == ("unknown", None, None)
    assert known.reason == "its implicit-fallback branch matches no known release"
    assert known.nearest_diff == DIFF.format(v=nearest, installed=installed)


def test_the_most_similar_branch_is_chosen_and_a_long_diff_is_cut(spec: PatchSpec) -> None:
    other = SOURCE.replace(b"get_decompositions([target])", b"get_decompositions([target, 2])")
    extra = b"".join(b"                x%d = 1\n" % i for i in range(30))
    table = spec._replace(releases=build_releases([("9.0.0", SOURCE), ("9.2.0", other)], spec))
    known = known_of(
        RECODED.replace(b"                log.info(", extra + b"                log.info("), table, "9.2.0"
    )
    shown = known.nearest_diff.splitlines()
    assert shown[0] == "The branch differs from the nearest release, 9.2.0:"  # same version, equally similar
    assert len(shown) == 1 + 24 + 1 and shown[-1] == "..."
    near = known_of(
        SOURCE.replace(b"else MissingOperatorWithoutDecomp", b"else MissingOperatorWithoutDecomX"),
        table,
        "9.2.0",
    )
    assert (
        near.nearest_diff.splitlines()[0] == "The branch differs from the nearest release, 9.0.0:"
    )  # more similar
    assert "..." not in near.nearest_diff.splitlines()


def test_no_diff_without_site_code(spec: PatchSpec) -> None:
    bare = spec._replace(releases=spec.releases._replace(site_code={}))
    known = known_of(RECODED, bare, "9.0.0")
    assert (known.kind, known.nearest_diff) == ("unknown", "")


def test_a_refused_file_is_unknown_with_its_reason_and_diff(spec: PatchSpec) -> None:
    warned = SOURCE.replace(b"log.info(", b"log.warning(")
    known = known_of(warned, spec, "9.0.0")
    assert known.kind == "unknown" and known.reason.startswith("the log call differs from the known one")
    assert known.nearest_diff.splitlines()[5:7] == ["-    log.info(", "+    log.warning("]
    broken = known_of(b"x = (\n", spec, None)
    assert (broken.kind, broken.release, broken.match, broken.nearest_diff) == ("unknown", None, None, "")
    assert broken.reason.startswith("graph.py is not valid Python (ParserSyntaxError: ")
    assert classify(warned, sha(warned), spec, "9.0.0", None)[0] == known
    assert known.cause == "site"


def test_a_file_without_the_import_is_unknown_for_that_cause(spec: PatchSpec) -> None:
    """The cause the command line names a release series for (2.0.x, 2.1.x) reaches the caller."""
    bare = SOURCE.replace(b"from torch._logging import LazyString", b"from torch._logging import other")
    assert bare != SOURCE
    for known in (known_of(bare, spec, "2.1.2"), classify(bare, sha(bare), spec, "2.1.2", None)[0]):
        assert (known.kind, known.cause) == ("unknown", "import"), known


def test_decide_on_each_known_release(spec: PatchSpec) -> None:
    known, rewritten = classify(SOURCE, sha(SOURCE), spec, "9.0.0+cu128", None)
    assert known == by_hash(sha(SOURCE), spec, "9.0.0") and isinstance(rewritten, Rewritten)
    at, line = world.line_of(SOURCE, EAGER)
    assert rewritten.source == PATCHED
    assert (rewritten.edit.offset, rewritten.edit.old, rewritten.edit.new) == (
        at,
        line,
        line.replace(EAGER, LAZY),
    )
    assert known.release is not None and rewritten.before == ((False, known.release.site, ""))
    for lazy in (PATCHED, NATIVE):
        assert classify(lazy, sha(lazy), spec, "9.0.0", None) == (by_hash(sha(lazy), spec, "9.0.0"), None)


def test_decide_on_a_vendor_build(spec: PatchSpec) -> None:
    known, rewritten = classify(VENDOR, sha(VENDOR), spec, "9.0.0+git8514f05", None)
    assert known == known_of(VENDOR, spec, "9.0.0") and known.kind == "eager"
    assert isinstance(rewritten, Rewritten) and rewritten.source == VENDOR.replace(EAGER, LAZY)
    lazy = VENDOR.replace(EAGER, LAZY)
    assert classify(lazy, sha(lazy), spec, "9.0.0", None) == (known_of(lazy, spec, "9.0.0"), None)


def test_an_exact_release_whose_one_edit_misses_the_table_is_unknown(spec: PatchSpec) -> None:
    row = spec.releases.rows[0]
    wrong = spec._replace(
        releases=spec.releases._replace(rows=(row._replace(patched_sha256="0" * 64), *spec.releases.rows[1:]))
    )
    assert classify(SOURCE, sha(SOURCE), wrong, "9.0.0", None) == (
        Known("unknown", None, None, "patching it does not give the known patched bytes of torch 9.0.0"),
        None,
    )
    doubled = SOURCE + b"# " + EAGER + b"\n"  # the eager text twice: no one-edit swap
    table = spec._replace(
        releases=spec.releases._replace(rows=(row._replace(sha256=sha(doubled)), *spec.releases.rows[1:]))
    )
    assert classify(doubled, sha(doubled), table, "9.0.0", None)[0].kind == "unknown"
    already = SOURCE + b"# " + LAZY + b"\n"  # the lazy text there already
    table = spec._replace(
        releases=spec.releases._replace(rows=(row._replace(sha256=sha(already)), *spec.releases.rows[1:]))
    )
    assert classify(already, sha(already), table, "9.0.0", None)[1] is None


def test_by_site_unknown_carries_the_diff(spec: PatchSpec) -> None:
    site = classify_module.by_site(
        __import__("patcher.core.outcome", fromlist=["Site"]).Site(False, "0" * 64, "if x:\n    pass\n"),
        spec,
        "9.0.0",
    )
    assert (site.kind, site.release, site.reason) == (
        "unknown",
        None,
        "its implicit-fallback branch matches no known release",
    )
    assert site.nearest_diff.startswith(
        "The branch differs from the nearest release, 9.0.0:\n--- torch 9.0.0 (nearest release)\n"
    )
    refused, _ = classify(
        b"def f(:\n", sha(b"def f(:\n"), spec, "9.0.0", None
    )  # refused with no branch: no diff
    assert refused._replace(reason="") == Known("unknown", None, None, "", "")


def test_the_newest_release_is_ordered_by_number_not_text(spec: PatchSpec) -> None:
    table = spec._replace(releases=build_releases([("9.9.0", SOURCE), ("9.10.0", SOURCE)], spec))
    hit = by_hash(sha(SOURCE), table, None)
    assert hit is not None and hit.release is not None and hit.release.version == "9.10.0"


def test_a_site_match_takes_the_release_of_its_version(three: PatchSpec) -> None:
    for version in ("9.0.0+rocm7.1", "9.0.1+cu128"):
        known = known_of(VENDOR, three, version)
        assert known.release is not None and known.release.version == version.split("+")[0]
        decided, rewritten = classify(VENDOR, sha(VENDOR), three, version, None)
        assert decided == known and rewritten is not None
        exact, _ = classify(SOURCE, sha(SOURCE), three, version, None)
        assert exact.release is not None and exact.release.version == version.split("+")[0]


def test_an_unknown_eager_branch_is_not_rewritten(spec: PatchSpec) -> None:
    known, rewritten = classify(RECODED, sha(RECODED), spec, "9.0.0", None)
    assert (known.kind, rewritten) == ("unknown", None)
    assert known.nearest_diff == DIFF.format(v="9.0.0", installed=" 9.0.0")


def test_a_refused_branch_is_shown_in_its_own_form(spec: PatchSpec) -> None:
    warned = SOURCE.replace(b"log.info(", b"log.warning(")
    assert known_of(warned, spec, "9.0.0+cu128").nearest_diff == (
        "The branch differs from the nearest release, 9.0.0:\n"
        "--- torch 9.0.0 (nearest release)\n"
        "+++ installed torch 9.0.0+cu128\n"
        "@@ -2,3 +2,3 @@\n"
        "     error = MissingOperatorWithDecomp if get_decompositions([target]) else MissingOperatorWithoutDecomp\n"
        "-    log.info(\n"
        "+    log.warning(\n"
        '         "Creating implicit fallback for:\\n%s",'
    )


def test_a_refused_lazy_branch_is_shown_against_the_lazy_one(spec: PatchSpec) -> None:
    """A lazy file whose log call changed is diffed against the lazy branches, its own version's patched
    one first (9.1.0 ships the same branch natively): only the call differs."""
    warned = PATCHED.replace(b"log.info(", b"log.warning(")
    shown = known_of(warned, spec, "9.0.0+cu128").nearest_diff.splitlines()
    assert shown[0] == "The branch differs from the nearest release, 9.0.0:"
    assert [line for line in shown if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-    log.info(",
        "+    log.warning(",
    ]


def test_between_equally_similar_branches_the_installed_version_wins(spec: PatchSpec) -> None:
    def branch(n: bytes) -> bytes:
        return SOURCE.replace(b"get_decompositions([target])", b"get_decompositions([target, " + n + b"])")

    table = spec._replace(releases=build_releases([("9.0.0", branch(b"2")), ("9.2.0", branch(b"3"))], spec))
    for version in ("9.0.0", "9.2.0"):
        shown = known_of(branch(b"1"), table, version).nearest_diff.splitlines()[0]
        assert shown == f"The branch differs from the nearest release, {version}:"


@pytest.mark.parametrize(("added", "lines", "cut"), [(19, 25, False), (20, 26, True)])
def test_a_diff_is_cut_after_24_lines(spec: PatchSpec, added: int, lines: int, cut: bool) -> None:
    extra = b"".join(b"                x%d = 1\n" % i for i in range(added))
    source = SOURCE.replace(b"                log.info(", extra + b"                log.info(")
    shown = known_of(source, spec, "9.0.0").nearest_diff.splitlines()
    assert len(shown) == lines and (shown[-1] == "...") == cut


def _vendor_record(
    offset_shift: int = 0, release: str = "9.0.0", claimed_old: bytes | None = None
) -> tuple[bytes, UndoRecord]:
    """A vendor build as apply leaves it (the undo record of its one edit), the record bent as asked."""
    patched, _, _ = world.applied(VENDOR, match="site")
    offset, old = world.line_of(VENDOR, EAGER)
    change = world.change_json(
        world.ROW, VENDOR, patched, offset + offset_shift, old if claimed_old is None else claimed_old,
        old.replace(EAGER, LAZY), 0o644, 0,
    )  # fmt: skip
    raw = world.undo_json(change, None, release, "site")
    return patched, UndoRecord.parse(raw, world.PATCH_ID, world.ROW, None)


def test_bytes_the_tool_wrote_are_known_by_its_record_without_a_parse(
    spec: PatchSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool image's command verifies a vendor build it patched with no libcst in the image."""
    patched, undo = _vendor_record()
    hit = classify_module.by_undo_record(patched, sha(patched), spec, undo)
    assert hit is not None and hit.release is not None
    assert (hit.kind, hit.release.version, hit.match) == ("patched", "9.0.0", "site")

    def no_parse(*_: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr("patcher.core.transform.site_of", no_parse)
    monkeypatch.setattr("patcher.core.transform.rewrite", no_parse)
    assert known_of(patched, spec, "9.0.0+rocm", undo) == hit
    assert classify(patched, sha(patched), spec, "9.0.0+rocm", undo) == (hit, None)


@pytest.mark.parametrize(
    ("bend", "why"),
    [
        ({"offset_shift": 1}, "its edit is not where it says"),
        ({"claimed_old": b"                    error.operator_str(target, argz, kwargs),\n"}, "another edit"),
        ({"release": "8.0.0"}, "a release the table does not have"),
    ],
)
def test_a_record_that_does_not_describe_the_bytes_settles_nothing(
    spec: PatchSpec, bend: dict[str, object], why: str
) -> None:
    patched, undo = _vendor_record(**bend)  # type: ignore[arg-type]
    assert classify_module.by_undo_record(patched, sha(patched), spec, undo) is None, why


def test_no_record_or_other_bytes_settle_nothing(spec: PatchSpec) -> None:
    patched, undo = _vendor_record()
    assert classify_module.by_undo_record(patched, sha(patched), spec, None) is None
    assert (
        classify_module.by_undo_record(patched + b"# edited\n", sha(patched + b"# edited\n"), spec, undo)
        is None
    )
    assert classify_module.by_undo_record(VENDOR, sha(VENDOR), spec, undo) is None


@pytest.mark.parametrize(
    ("old", "new", "ours"),
    [
        (b"    " + EAGER + b",\n", b"    " + LAZY + b",\n", True),
        (b"    " + EAGER + b",\n", b"    " + LAZY + b", 1\n", False),  # one eager call, another edit
        (b"    " + EAGER + b", " + EAGER + b"\n", b"    " + LAZY + b", " + LAZY + b"\n", False),  # two
        (b"    x,\n", b"    x,\n", False),  # no eager call: nothing to make lazy
    ],
)
def test_only_the_patchs_one_edit_is_ours(spec: PatchSpec, old: bytes, new: bytes, ours: bool) -> None:
    from patcher.core.edits import Edit

    assert classify_module.one_edit(Edit(0, old, new), spec) is ours
