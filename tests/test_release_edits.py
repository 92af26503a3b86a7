"""docs/releasing.md's two edits of the checkout, run as it gives them (the blocks marked
`<!-- repository -->` and `<!-- bump -->`) in a throwaway committed clone: naming the repository
rewrites every URL derived from pyproject.toml's Source, and the version bump leaves the old version
in CHANGELOG.md alone; the release tests pass in the clone after each."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import patcher
from tests.helpers import checkout_copy

pytestmark = pytest.mark.runner_independent

ROOT = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
# The release tests that read what the edits change (the CHANGELOG, the workflows, the docs' names of
# the version); those that build the artifacts run on this checkout.
RELEASE_TESTS = [
    "tests/test_release.py::test_the_changelog_gives_this_versions_notes_and_the_readme_links_the_release_pages",
    "tests/test_release.py::test_nothing_goes_public_before_the_approved_publish_and_the_tagged_commits_tests",
    "tests/test_release.py::test_every_action_is_pinned_to_a_commit_with_its_version_beside_it",
    "tests/test_docs.py",
]


def _block(marker: str) -> str:
    text = (ROOT / "docs" / "releasing.md").read_text()
    after = text.split(f"<!-- {marker} -->\n", 1)[1]
    found = re.search(r"^\s*```text\n\s*(.+)\n\s*```", after, re.M)
    assert found, marker
    return found[1].strip()


def _clone(tmp_path: Path) -> Path:
    clone = checkout_copy(tmp_path / "clone")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"]):
        subprocess.run([*GIT, "-C", str(clone), *args], check=True, capture_output=True)
    return clone


def _run(clone: Path, command: str) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _naming(clone: Path, text: str) -> list[str]:
    done = subprocess.run([*GIT, "-C", str(clone), "grep", "-l", "-F", text], capture_output=True, text=True)
    return done.stdout.split()


def _release_tests_pass(clone: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_", "COVERAGE"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *RELEASE_TESTS],
        cwd=clone, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:]


def _changelog_entries(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^## \[(\d[^\]]*)\] - (\S+)$", text, re.M)


def test_naming_the_repository_rewrites_every_url_derived_from_the_source(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    old = re.findall(r'^Source = "(.+)"$', (clone / "pyproject.toml").read_text(), re.M)[0]
    url = "https://github.com/Example-Org/torch-lazylog"
    command = _block("repository")
    assert command == "python3 .ci/release.py repository URL"
    changed = _run(clone, command.replace("URL", url)).split()
    assert set(changed) <= {"pyproject.toml", "CHANGELOG.md", "docs/package-index.md"}
    toml = (clone / "pyproject.toml").read_text()
    urls = dict(
        re.findall(r'^(\w+) = "(https://.+)"$', toml.split("[project.urls]")[1].split("\n[")[0], re.M)
    )
    assert urls["Source"] == url and all(u.startswith(url) for u in urls.values()), urls
    tag = f"v{patcher.__version__}"
    assert (
        urls["Changelog"] == f"{url}/blob/{tag}/CHANGELOG.md"
        and urls["Documentation"] == f"{url}/tree/{tag}/docs"
    )
    # Only releasing.md, the maintainers' page for any fork, keeps the placeholder.
    assert _naming(clone, old) == ([] if old == url else ["docs/releasing.md"]), _naming(clone, old)
    index = (clone / "docs" / "package-index.md").read_text()
    assert f"<registry>/example-org/torch-lazylog:{patcher.__version__}" in index
    assert "--repo Example-Org/torch-lazylog" in index and f"{url}/blob/{tag}/README.md" in index
    assert f"[{patcher.__version__}]: {url}/releases/tag/{tag}" in (clone / "CHANGELOG.md").read_text()
    _release_tests_pass(clone)
    # Run again: nothing left to change.
    assert _run(clone, command.replace("URL", url)) == ""


def test_the_bump_leaves_the_old_version_in_the_changelog_alone(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    old = patcher.__version__
    major, minor, patch = map(int, old.split("."))
    new = f"{major}.{minor}.{patch + 1}"
    changelog = clone / "CHANGELOG.md"
    before = changelog.read_text()
    command = _block("bump")
    assert command == "python3 .ci/release.py bump VERSION"
    # With nothing under [Unreleased] there is nothing to release, and nothing is written.
    before = re.sub(
        r"^## \[Unreleased\]\n.*?(?=^## \[)", "## [Unreleased]\n\n", before, count=1, flags=re.M | re.S
    )
    changelog.write_text(before)
    subprocess.run(
        [*GIT, "-C", str(clone), "commit", "-q", "--allow-empty", "-am", "nothing unreleased"], check=True
    )
    done = subprocess.run(
        ["bash", "-c", command.replace("VERSION", new)], cwd=clone, capture_output=True, text=True
    )
    assert done.returncode == 1 and "[Unreleased] has no entries" in done.stderr, done.stderr
    assert (
        subprocess.run(
            [*GIT, "-C", str(clone), "status", "--porcelain"], capture_output=True, text=True
        ).stdout
        == ""
    )
    changelog.write_text(before.replace("## [Unreleased]\n", "## [Unreleased]\n\n### Fixed\n\n- A fix.\n", 1))
    subprocess.run([*GIT, "-C", str(clone), "commit", "-qam", "an entry"], check=True)

    changed = _run(clone, command.replace("VERSION", new)).split()
    assert "patcher/__init__.py" in changed and changed[-1] == "CHANGELOG.md"
    old_named = re.compile(rf"(?<![\d.]){re.escape(old)}(?!\.?\d)")
    tracked = subprocess.run([*GIT, "-C", str(clone), "ls-files"], capture_output=True, text=True, check=True)
    naming = []
    for name in tracked.stdout.split():
        try:
            if old_named.search((clone / name).read_text()):
                naming.append(name)
        except (UnicodeDecodeError, IsADirectoryError):
            continue
    assert naming == ["CHANGELOG.md"], naming
    text = changelog.read_text()
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert _changelog_entries(text)[:2] == [(new, today), (old, _changelog_entries(before)[0][1])]
    assert "[Unreleased]: " in text and f"/compare/v{new}...HEAD" in text and f"/releases/tag/v{new}" in text
    assert text.split(f"## [{new}] - {today}\n", 1)[1].lstrip().startswith("### Fixed\n\n- A fix.")
    assert f'__version__ = "{new}"' in (clone / "patcher" / "__init__.py").read_text()
    _release_tests_pass(clone)
