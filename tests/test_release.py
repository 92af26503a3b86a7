"""The release as CI and the forge make it: .ci/run's named steps are the forge's, the workflows are
pinned and hold no more rights than they use, .ci/dist refuses a tag that is not the version, and the
single file is the same bytes from any checkout. (.ci/run's dist step builds every artifact twice,
from two clean clones, and compares them.)"""

from __future__ import annotations

import email
import email.message
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml: the test extra's

import patcher
from tests import realdata
from tests.conftest import need
from tests.helpers import checkout_copy

# Their outcome does not depend on the Python running pytest (see pyproject.toml's markers).
pytestmark = pytest.mark.runner_independent

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
CI_STEP = re.compile(r"\.ci/run (\w+)")


def _workflow(name: str) -> dict[Any, Any]:
    """A workflow as YAML reads it (PyYAML reads the key `on` as True)."""
    loaded = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def _runs(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def _ci_run_steps() -> list[str]:
    done = subprocess.run(["bash", ".ci/run", "--list"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_forges_ci_runs_the_steps_of_ci_run_and_ci_run_runs_them_all() -> None:
    """ci.yml's jobs call `.ci/run STEP`: together, every step .ci/run lists (by name, or within the
    merge tier's step, which runs some by name), and no other; .ci/run itself, run whole, calls each
    of them too ("$self" STEP), so the two cannot drift apart."""
    steps = _ci_run_steps()
    forge = [name for run in _runs(_workflow("ci.yml")) for name in CI_STEP.findall(run)]
    whole = (ROOT / ".ci" / "run").read_text()
    merge = re.search(r"^step_merge\(\) \{\n(.*?)^\}", whole, re.S | re.M)
    assert merge and "merge" in forge, "the forge runs the merge tier"
    assert sorted({*forge, *re.findall(r'"\$self" (\w+)', merge[1])}) == sorted(steps), (forge, steps)
    # (install is the first half of tests, the README's command, which the whole run calls.)
    assert sorted({*re.findall(r'"\$self" (\w+)', whole), "install"}) == sorted(steps)
    release = [name for run in _runs(_workflow("release.yml")) for name in CI_STEP.findall(run)]
    assert release and set(release) <= set(steps), release


def test_an_unknown_step_is_refused_by_name() -> None:
    done = subprocess.run(["bash", ".ci/run", "nosuch"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "no step nosuch" in done.stderr, done.stderr


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it() -> None:
    pins: dict[str, set[str]] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" not in line:
                continue
            match = re.fullmatch(
                r"\s*(?:- )?uses: ([\w.-]+/[\w.-]+)(?:/[\w.-]+)*@([0-9a-f]{40})  # v\d+(\.\d+)*", line
            )
            assert match, f"{path.name}: {line.strip()}"
            pins.setdefault(match[1], set()).add(match[2])
    assert pins and all(len(shas) == 1 for shas in pins.values()), pins


def test_each_job_holds_only_the_rights_it_uses() -> None:
    """Read-only by default; an OIDC token in the publishing job alone, in its protected environment;
    no pull_request_target; no expression expanded inside a shell line."""
    ci, release = _workflow("ci.yml"), _workflow("release.yml")
    assert ci["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in ci["jobs"].values())
    assert release["permissions"] == {}
    rights = {name: job["permissions"] for name, job in release["jobs"].items()}
    # An OIDC token where something is signed or published: the publish job (the index, the files'
    # provenance) and the image job (the image's provenance), both after the approval.
    assert [name for name, granted in rights.items() if granted.get("id-token") == "write"] == [
        "publish",
        "image",
    ]
    assert release["jobs"]["publish"]["environment"] == "pypi"
    assert [name for name, granted in rights.items() if "write" in granted.values()] == [
        "publish",
        "image",
        "forge-release",
    ]
    for workflow in (ci, release):
        assert "pull_request_target" not in workflow[True]
        assert [run for run in _runs(workflow) if "${{" in run] == []


def test_the_release_publishes_attests_and_pushes_both_architectures() -> None:
    release = (WORKFLOWS / "release.yml").read_text()
    jobs = _workflow("release.yml")["jobs"]
    uses = [step.get("uses", "").split("@")[0] for job in jobs.values() for step in job["steps"]]
    assert "actions/attest-build-provenance" in uses
    (push,) = [s["with"] for s in jobs["image"]["steps"] if s.get("uses", "").startswith("docker/build-push")]
    assert push["platforms"] == "linux/amd64,linux/arm64" and push["push"] is True
    assert push["provenance"] == "mode=max" and push["sbom"] is True and push["target"] == "torch-lazylog"
    assert "password:" not in release.replace("password: ${{ github.token }}", "")


def _repository_of(tmp_path: Path, tag: str) -> Path:
    """A clean clone as the release workflow has it: this checkout's tracked files, committed, tagged."""
    clone = checkout_copy(tmp_path / "clone")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"], ["tag", tag]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return clone


def test_dist_refuses_a_tag_that_is_not_the_version_before_building(tmp_path: Path) -> None:
    clone = _repository_of(tmp_path, "v9.9.9")
    out = tmp_path / "out"
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"the tag v9.9.9 is not the version patcher/__version__ says (v{patcher.__version__})" in done.stderr
    )
    assert list(out.iterdir()) == []
    # The tag a release workflow runs for counts as well, on an untagged commit.
    subprocess.run(["git", "-C", str(clone), "tag", "-d", "v9.9.9"], check=True, capture_output=True)
    env = {**os.environ, "GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v0.0.0"}
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "the tag v0.0.0 is not" in done.stderr, done.stderr


def test_dist_refuses_a_tag_of_another_day_than_the_changelogs_entry(tmp_path: Path) -> None:
    """The release's date is its tag's: a tag v<version> made on another day (UTC) than CHANGELOG.md's
    heading for the version gives stops .ci/dist before anything is built, and says how to go on."""
    clone = _repository_of(tmp_path, "unused")
    (dated,) = re.findall(
        rf"^## \[{re.escape(patcher.__version__)}\] - (\S+)$", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    env = {**os.environ, "GIT_COMMITTER_DATE": "2001-02-03T23:30:00-05:00"}  # 2001-02-04 in UTC
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "tag", "-a", "-m", "t", f"v{patcher.__version__}"], check=True, env=env)
    out = tmp_path / "out"
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"the tag v{patcher.__version__} is of 2001-02-04 (UTC), but CHANGELOG.md dates" in done.stderr
    assert f"'{dated}'" in done.stderr and "python3 .ci/release.py date" in done.stderr
    assert list(out.iterdir()) == []


def _single_file(checkout: Path, out: Path, epoch: str | None) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env.update({"SOURCE_DATE_EPOCH": epoch} if epoch else {})
    subprocess.run(
        [sys.executable, "-B", "-m", "patcher.pyz", str(out)],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def test_the_single_file_is_the_same_bytes_from_two_checkouts_built_apart(tmp_path: Path) -> None:
    """Two copies of this checkout, in different directories, their files of different times and modes:
    the same bytes, with SOURCE_DATE_EPOCH's time on every member (the earliest a zip holds without)."""
    first = checkout_copy(tmp_path / "one")
    second = checkout_copy(tmp_path / "two" / "deeper")
    later = time.time() + 3600
    for path in second.rglob("*.py"):
        os.utime(path, (later, later))
        path.chmod(0o664)
    for epoch in (None, "1764806400"):
        one = _single_file(first, tmp_path / "one.pyz", epoch)
        two = _single_file(second, tmp_path / "two.pyz", epoch)
        assert one == two
        with zipfile.ZipFile(tmp_path / "one.pyz") as archive:
            stamps = {member.date_time for member in archive.infolist()}
            modes = {member.external_attr >> 16 for member in archive.infolist()}
        assert stamps == {time.gmtime(int(epoch or 315532800))[:6]}, stamps
        assert modes == {0o100644, 0o40755}, modes
    assert (tmp_path / "one.pyz").stat().st_mode & 0o777 == 0o755


def test_the_tools_are_pinned_to_the_versions_the_index_served() -> None:
    """.ci/constraints.txt pins every tool CI installs for the release, each to one version (but the
    publisher's, locked with their hashes in .ci/publish.txt)."""
    pinned = dict(
        line.split("==")
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert {"click", "libcst", "setuptools", "build", "check-wheel-contents", "zizmor"} == set(pinned)
    assert all(re.fullmatch(r"\d+(\.\d+)+", version) for version in pinned.values()), pinned


def test_the_changelog_gives_this_versions_notes_and_the_readme_links_the_release_pages() -> None:
    """CHANGELOG.md (Keep a Changelog) has an entry for this version, which the release workflow's awk
    takes as the notes; the README links it and docs/releasing.md and says where releases appear."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in changelog
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert headings[0] in ("Unreleased", patcher.__version__) and patcher.__version__ in headings
    (notes,) = [run for run in _runs(_workflow("release.yml")) if "CHANGELOG.md" in run]
    awk = re.search(r"awk (.*) CHANGELOG.md", notes)
    assert awk
    taken = subprocess.run(
        ["bash", "-c", f"awk {awk[1]} CHANGELOG.md".replace('"$version"', patcher.__version__)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    entry = changelog.split(f"## [{patcher.__version__}]")[1].split("\n## [")[0]
    assert taken.strip() and taken.strip() == entry.split("\n", 1)[1].strip()
    # Keep a Changelog: each release's heading dated, each heading's link reference at the end.
    assert re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M) == [
        h for h in headings if h != "Unreleased"
    ]
    source = re.findall(r'^Source = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[0]
    for heading in headings:
        tag = "compare/v" if heading == "Unreleased" else f"releases/tag/v{heading}"
        assert re.search(rf"^\[{re.escape(heading)}\]: {re.escape(source)}/{tag}", changelog, re.M), heading
    readme = (ROOT / "README.md").read_text()
    assert "(CHANGELOG.md)" in readme and "(docs/releasing.md)" in readme
    releasing = (ROOT / "docs" / "releasing.md").read_text()
    assert "sha256sum --ignore-missing -c SHA256SUMS" in releasing and "gh attestation verify" in releasing


def _needs(job: dict[str, Any]) -> set[str]:
    needs = job.get("needs", [])
    return {needs} if isinstance(needs, str) else set(needs)


def _after(jobs: dict[str, Any], name: str) -> set[str]:
    """Every job that must have ended before `name` starts (its needs, and theirs)."""
    before = _needs(jobs[name])
    return before.union(*(_after(jobs, need) for need in before)) if before else set()


def test_nothing_goes_public_before_the_approved_publish_and_the_tagged_commits_tests() -> None:
    """The order: dist and the tagged commit's fast suite, then the publish in the protected
    environment, then the image, then the forge release; no job before the publish writes anything,
    and only the publish job runs in the environment (one approval, before anything is public)."""
    release = _workflow("release.yml")
    jobs = release["jobs"]
    assert release["permissions"] == {}
    assert _needs(jobs["publish"]) == {"preflight", "dist", "tests"}
    assert _needs(jobs["image"]) == {"preflight", "publish"}
    assert _needs(jobs["forge-release"]) == {"preflight", "publish", "image"}
    assert [name for name, job in jobs.items() if "environment" in job] == ["publish"]
    assert jobs["publish"]["environment"] == "pypi"
    for name, job in jobs.items():
        writes = "write" in job["permissions"].values()
        assert writes == (name == "publish" or "publish" in _after(jobs, name)), name
    # The tests job runs CI's merge tier's steps, on the tagged commit.
    merge = [CI_STEP.findall(run) for run in _runs({"jobs": {"merge": _workflow("ci.yml")["jobs"]["merge"]}})]
    tests = [CI_STEP.findall(run) for run in _runs({"jobs": {"tests": jobs["tests"]}})]
    assert tests == merge and ["merge"] in tests, tests


def _step(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if step.get("uses", "").split("@")[0] == action]


def test_the_image_digest_gets_a_signed_provenance_in_the_registry() -> None:
    image = _workflow("release.yml")["jobs"]["image"]
    (push,) = _step(image, "docker/build-push-action")
    (attest,) = _step(image, "actions/attest-build-provenance")
    assert image["steps"].index(push) < image["steps"].index(attest)
    assert attest["with"] == {
        "subject-name": "${{ steps.meta.outputs.image }}",
        "subject-digest": "${{ steps." + push["id"] + ".outputs.digest }}",
        "push-to-registry": True,
    }
    (meta,) = [step for step in image["steps"] if step.get("id") == "meta"]
    assert 'echo "image=$image"' in meta["run"] and "tags=$image:$version" in meta["run"]
    assert {"id-token", "attestations", "packages"} <= {
        right for right, granted in image["permissions"].items() if granted == "write"
    }


def _locked(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M))


def test_the_publisher_is_the_hash_locked_twine_that_dist_checks_with() -> None:
    """The publish job uploads and signs with .ci/publish.txt's tools, installed by their hashes, and
    .ci/run dist checks the artifacts with the same lock's twine; the lock holds what publish.in asks."""
    publish = _workflow("release.yml")["jobs"]["publish"]
    runs = "\n".join(step["run"] for step in publish["steps"] if "run" in step)
    assert "--require-hashes --no-deps" in runs and "-r .ci/publish.txt" in runs
    assert '/bin/twine" upload --non-interactive --skip-existing --attestations index/*' in runs
    assert "-m pypi_attestations sign index/*.tar.gz index/*.whl" in runs
    assert not _step(publish, "pypa/gh-action-pypi-publish")
    # the upload comes before the files' provenance: nothing is signed in public for files the
    # index refused
    names = [step.get("name", step.get("uses", "")) for step in publish["steps"]]
    assert names.index("upload to the package index") < next(
        i for i, name in enumerate(names) if name.startswith("actions/attest-build-provenance")
    )
    lock = (ROOT / ".ci" / "publish.txt").read_text()
    pins = _locked(lock)
    wanted = dict(
        line.split("==") for line in (ROOT / ".ci" / "publish.in").read_text().splitlines() if "==" in line
    )
    assert wanted.items() <= pins.items() and "pkginfo" not in pins, (wanted, pins)
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.split("\n\n", 1)[1].strip())
    assert len(blocks) == len(pins) and all("--hash=sha256:" in block for block in blocks)
    run = (ROOT / ".ci" / "run").read_text()
    assert ".venv-publish/bin/twine check --strict" in run and "-r .ci/publish.txt" in run
    assert "twine" not in (ROOT / ".ci" / "constraints.txt").read_text().split("\nclick==")[1]


def test_the_build_backend_that_writes_the_metadata_is_pinned_within_the_build_systems_range() -> None:
    """.ci/constraints.txt's setuptools (the release's build) lies in [build-system]'s range, and
    that range has an upper bound: the Metadata-Version it writes moves only with an edit here."""
    from packaging.requirements import Requirement

    toml = (ROOT / "pyproject.toml").read_text()
    (requires,) = re.findall(r'^requires = \["([^"]+)"\]', toml, re.M)
    backend = Requirement(requires)
    assert backend.name == "setuptools" and any(spec.operator == "<" for spec in backend.specifier)
    (pinned,) = re.findall(r"^setuptools==(\S+)$", (ROOT / ".ci" / "constraints.txt").read_text(), re.M)
    assert backend.specifier.contains(pinned), (str(backend), pinned)


def _committed_clone(tmp_path: Path) -> Path:
    clone = checkout_copy(tmp_path / "clone")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return clone


def test_dist_refuses_a_release_run_in_a_repository_the_metadata_does_not_name(tmp_path: Path) -> None:
    clone = _committed_clone(tmp_path)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "GITHUB_REF_TYPE": "tag",
        "GITHUB_REF_NAME": f"v{patcher.__version__}",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "someone-else/torch-lazylog",
    }
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "this release runs in https://github.com/someone-else/torch-lazylog" in done.stderr
    assert list(out.iterdir()) == []


def test_dist_fails_when_the_publishers_twine_cannot_read_the_metadata_version(tmp_path: Path) -> None:
    """`.ci/run dist` with the publisher v1.8.14 of pypa/gh-action-pypi-publish ran (twine 5.0.0,
    pkginfo 1.10.0, which read Metadata-Version up to 2.3) in .ci/publish.txt's place: the artifacts
    this commit builds (Metadata-Version 2.4) are refused there, before any upload. (.ci/run runs the
    same step with the real lock, which passes.)"""
    clone = _committed_clone(tmp_path)
    older = ROOT / "tests" / "data" / "release" / "publisher-v1.8.14.txt"
    shutil.copy(older, clone / ".ci" / "publish.txt")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "-am", "the older publisher"], check=True, capture_output=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = need(_a_python_the_older_lock_installs_on)
    assert isinstance(python, Path)
    (bin_dir / "python3").symlink_to(python)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", ".ci/run", "dist"], cwd=clone, capture_output=True, text=True, env=env)
    if done.returncode != 0 and not (clone / ".venv-publish" / "bin" / "twine").exists():
        need(lambda: _unavailable("the older publisher's tools", done.stderr))
    assert done.returncode != 0, done.stdout
    assert "supported Metadata-Version: 1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 2.3" in " ".join(done.stdout.split())
    assert "dist: two clean clones give the same bytes" not in done.stdout


def _a_python_the_older_lock_installs_on() -> Path:
    """A CPython 3.12 or older, the runner's first: the older lock has no wheels for a newer one
    (cffi 1.16.0), and `.ci/run dist` makes the publisher's venv with the `python3` on PATH."""
    runner = Path(sys.executable)
    if sys.version_info < (3, 13):
        return runner
    older = [p for p in realdata.other_pythons() if int(p.name.removeprefix("python3.")) < 13]
    if not older:
        raise realdata.Unavailable("no CPython 3.12 or older on this machine for the older publisher's lock")
    return older[-1]


def _unavailable(what: str, stderr: str) -> None:
    why = (stderr.strip().splitlines() or ["no output"])[-1]
    raise realdata.Unavailable(f"could not fetch {what} from the package registry: {why}")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the release publishes: `.ci/dist OUT` on a clean clone of this checkout."""
    clone = _committed_clone(tmp_path_factory.mktemp("release"))
    out = clone.parent / "out"
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True)
    if done.returncode != 0:
        need(lambda: _unavailable("the build tools", done.stderr))
    return out


def _metadata(artifacts: Path) -> email.message.Message:
    (wheel,) = artifacts.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def test_the_index_page_lands_a_user(artifacts: Path) -> None:
    """The wheel's METADATA: the five Project-URLs on one forge repository, the classifiers (the
    supported Pythons, no license classifier beside License-Expression), and a description with the
    index's install lines, the image's name by the workflow's registry variable, and no relative
    link: every link is absolute, to the forge at this release's tag where it names a file."""
    metadata = _metadata(artifacts)
    urls = dict(value.split(", ", 1) for value in metadata.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Source", "Issues", "Changelog", "Documentation"}
    source = urls["Source"]
    assert re.fullmatch(r"https://[\w.-]+/[\w.-]+/torch-lazylog", source)
    assert all(url.startswith(source) for url in urls.values()), urls
    classifiers = metadata.get_all("Classifier") or []
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (10, 11, 12, 13)} <= set(classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")] and metadata["License-Expression"]
    description = metadata.get_payload()
    assert isinstance(description, str)
    for line in ("pip install torch-lazylog", "uvx torch-lazylog", "pipx run torch-lazylog"):
        assert line in description, line
    (registry,) = set(re.findall(r"vars\.(\w+)", (WORKFLOWS / "release.yml").read_text()))
    assert f"`{registry}`" in description
    owner = source.split("/")[-2].lower()  # the registry's names are lower case
    assert f"<registry>/{owner}/torch-lazylog:{patcher.__version__}" in description
    links = re.findall(r"\]\(([^)]+)\)", description)
    assert links and all(link.startswith("https://") for link in links), links
    at_tag = f"{source}/blob/v{patcher.__version__}/"
    for link in links:
        assert link.startswith((at_tag, f"{source}/releases/tag/v{patcher.__version__}")), link
        if link.startswith(at_tag):
            assert (ROOT / link.removeprefix(at_tag).split("#")[0]).is_file(), link


def test_the_sdist_is_one_a_packager_tests_from(artifacts: Path, tmp_path: Path) -> None:
    """Unpacked, with the wheel and its core-test extra installed in a venv (nothing of the checkout),
    plain `pytest` in the sdist runs: it carries tests/core and no other tests, and CHANGELOG.md."""
    (sdist,) = artifacts.glob("*.tar.gz")
    (wheel,) = artifacts.glob("*.whl")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (tree,) = (tmp_path / "unpacked").iterdir()
    assert (tree / "CHANGELOG.md").read_bytes() == (ROOT / "CHANGELOG.md").read_bytes()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    shipped = {p.relative_to(tree).parts[:2] for p in (tree / "tests").rglob("*.py")}
    assert shipped == {("tests", "__init__.py"), ("tests", "core")}, shipped
    need(
        lambda: realdata.pip(
            ["install", "-q", f"{wheel}[core-test]"], "the core-test extra", venv / "bin" / "python"
        )
    )
    done = subprocess.run(
        [str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COV_", "COVERAGE"))},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\d+ passed", done.stdout) and "error" not in done.stdout.splitlines()[-1]


def test_the_files_verify_commands_of_releasing_md_run_on_what_dist_makes(artifacts: Path) -> None:
    """docs/releasing.md's user checks: `sha256sum -c SHA256SUMS` runs here on .ci/dist's output and
    says OK for each file; each `gh attestation verify FILE` names a file the release publishes (it
    needs the forge to run)."""
    text = (ROOT / "docs" / "releasing.md").read_text()
    block = text.split("## Checking what you pulled", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert "sha256sum --ignore-missing -c SHA256SUMS" in lines
    done = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=artifacts, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.count(": OK") == 3, done.stdout
    # A user who downloaded one file checks that one.
    (wheel,) = artifacts.glob("*.whl")
    alone = artifacts.parent / "one-file"
    alone.mkdir(exist_ok=True)
    shutil.copy(wheel, alone)
    shutil.copy(artifacts / "SHA256SUMS", alone)
    done = subprocess.run(
        ["sha256sum", "--ignore-missing", "-c", "SHA256SUMS"], cwd=alone, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"{wheel.name}: OK\n", done.stdout + done.stderr
    published = {p.name for p in artifacts.iterdir()}
    files = [
        line.split()[3]
        for line in lines
        if line.startswith("gh attestation verify ") and "oci://" not in line
    ]
    assert files and {f.replace(patcher.__version__, "VERSION") for f in files} <= {
        f.replace(patcher.__version__, "VERSION") for f in published
    }, files
    assert [line for line in lines if "gh attestation verify oci://" in line and "@sha256:" in line]
    assert all("--repo OWNER/torch-lazylog" in line for line in lines if line.startswith("gh "))
