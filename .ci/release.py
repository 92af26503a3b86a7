"""A release's edits of the checkout, each one command (docs/releasing.md):

    python3 .ci/release.py repository URL   name the forge repository
    python3 .ci/release.py bump VERSION     the next version, its CHANGELOG entry dated today (UTC)
    python3 .ci/release.py date             date this version's CHANGELOG entry today (UTC)

The repository is written in one place, pyproject.toml's [project.urls] Source; every other URL of it
(the other Project-URLs, CHANGELOG.md's link references, docs/package-index.md's links, the image's
name and the attestation commands there) is rewritten from it, in DERIVED. The version is
patcher/__init__.py's __version__; a bump rewrites every tracked text file that names it, all but
CHANGELOG.md, whose older entries keep theirs. The tag's date must be the entry's: .ci/dist refuses
a tag of another day before anything is built."""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = "pyproject.toml"
CHANGELOG = "CHANGELOG.md"
INIT = "patcher/__init__.py"
# The files whose URLs are the Source URL's (tests/test_release.py: no other tracked file names it).
DERIVED = (PYPROJECT, CHANGELOG, "docs/package-index.md")
# The image the release workflow pushes is always this name, under the owner in lower case.
IMAGE = "torch-lazylog"
REPOSITORY = re.compile(r"https://[\w.-]+/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+)")
VERSION = re.compile(r"\d+\.\d+\.\d+")


class Refused(Exception):
    """A command that cannot be carried out, with the sentence that says why."""


def _read(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def _write(path: str, text: str) -> None:
    target = ROOT / path
    staged = target.with_name(target.name + ".release-tmp")
    staged.write_text(text, encoding="utf-8")
    staged.replace(target)


def source() -> str:
    found = re.findall(r'^Source = "(.+)"$', _read(PYPROJECT), re.M)
    if len(found) != 1:
        raise Refused(f"{PYPROJECT} names no single Source URL under [project.urls]")
    return str(found[0])


def version() -> str:
    found = re.findall(r'^__version__ = "(.+)"$', _read(INIT), re.M)
    if len(found) != 1:
        raise Refused(f"{INIT} has no __version__")
    return str(found[0])


def project_urls(base: str, at: str) -> str:
    """pyproject.toml's [project.urls] table body: every URL from the Source, files at the tag `at`."""
    return (
        f'Homepage = "{base}"\n'
        f'Source = "{base}"\n'
        f'Issues = "{base}/issues"\n'
        f'Changelog = "{base}/blob/{at}/CHANGELOG.md"\n'
        f'Documentation = "{base}/tree/{at}/docs"\n'
    )


def _urls_table(text: str, base: str, at: str) -> str:
    table = re.compile(r"(^\[project\.urls\]\n(?:#.*\n)*)(?:\w+ = \".*\"\n)+", re.M)
    if not table.search(text):
        raise Refused(f"{PYPROJECT} has no [project.urls] table")
    return table.sub(lambda match: match[1] + project_urls(base, at), text, count=1)


def _moved(text: str, old: str, new: str) -> str:
    """`old`'s URLs, image name and `--repo` arguments, as `new`'s."""
    before, after = REPOSITORY.fullmatch(old), REPOSITORY.fullmatch(new)
    assert before and after
    text = text.replace(old, new)
    text = text.replace(
        f"<registry>/{before['owner']}/{IMAGE}", f"<registry>/{after['owner'].lower()}/{IMAGE}"
    )
    text = text.replace(
        f"<registry>/{before['owner'].lower()}/{IMAGE}", f"<registry>/{after['owner'].lower()}/{IMAGE}"
    )
    old_repo, new_repo = f"{before['owner']}/{before['name']}", f"{after['owner']}/{after['name']}"
    return text.replace(f"--repo {old_repo}", f"--repo {new_repo}")


def repository(url: str) -> list[str]:
    url = url.rstrip("/").removesuffix(".git")
    if not REPOSITORY.fullmatch(url):
        raise Refused(f"{url} is not a repository's address (https://HOST/OWNER/NAME)")
    old = source()
    changed = []
    for path in DERIVED:
        text = _read(path)
        new = _moved(text, old, url)
        if path == PYPROJECT:
            new = _urls_table(new, url, f"v{version()}")
        if new != text:
            _write(path, new)
            changed.append(path)
    return changed


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0") if name]


def naming(old: str) -> re.Pattern[str]:
    """`old` as a version on its own: not inside 10.1.0 or 0.1.01."""
    return re.compile(rf"(?<![\d.]){re.escape(old)}(?!\.?\d)")


def _changelog_bumped(text: str, old: str, new: str, base: str) -> str:
    unreleased = re.search(r"^## \[Unreleased\]\n(.*?)(?=^## \[)", text, re.M | re.S)
    if not unreleased or not unreleased[1].strip():
        raise Refused(f"{CHANGELOG}'s [Unreleased] has no entries: write what {new} changes there first")
    text = text.replace(
        unreleased[0], f"## [Unreleased]\n\n## [{new}] - {_today()}\n\n{unreleased[1].lstrip()}", 1
    )
    links = re.compile(rf"^\[Unreleased\]: {re.escape(base)}/compare/v{re.escape(old)}\.\.\.HEAD\n", re.M)
    if not links.search(text):
        raise Refused(f"{CHANGELOG} has no link `[Unreleased]: {base}/compare/v{old}...HEAD`")
    return links.sub(
        f"[Unreleased]: {base}/compare/v{new}...HEAD\n[{new}]: {base}/releases/tag/v{new}\n", text, count=1
    )


def bump(new: str) -> list[str]:
    old = version()
    if not VERSION.fullmatch(new):
        raise Refused(f"{new} is not a version MAJOR.MINOR.PATCH")
    if tuple(map(int, new.split("."))) <= tuple(map(int, old.split("."))):
        raise Refused(f"{new} does not come after {old}")
    base = source()
    changelog = _changelog_bumped(_read(CHANGELOG), old, new, base)
    changed = []
    for path in _tracked():
        if path == CHANGELOG or not (ROOT / path).is_file():
            continue
        try:
            text = _read(path)
        except UnicodeDecodeError:
            continue  # not text: no version in it
        bumped = naming(old).sub(new, text)
        if bumped != text:
            _write(path, bumped)
            changed.append(path)
    _write(CHANGELOG, changelog)
    return [*changed, CHANGELOG]


def date() -> list[str]:
    current = version()
    heading = re.compile(rf"^## \[{re.escape(current)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", re.M)
    text = _read(CHANGELOG)
    if not heading.search(text):
        raise Refused(f"{CHANGELOG} has no dated entry for {current}")
    dated = heading.sub(f"## [{current}] - {_today()}", text, count=1)
    if dated == text:
        return []
    _write(CHANGELOG, dated)
    return [CHANGELOG]


USAGE = "usage: python3 .ci/release.py repository URL | bump VERSION | date"


def main(argv: list[str]) -> int:
    try:
        match argv:
            case ["repository", url]:
                changed = repository(url)
            case ["bump", new]:
                changed = bump(new)
            case ["date"]:
                changed = date()
            case _:
                print(USAGE, file=sys.stderr)
                return 2
    except Refused as refused:
        print(f"release.py: {refused}", file=sys.stderr)
        return 1
    for path in changed:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
