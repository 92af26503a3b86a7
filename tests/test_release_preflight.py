"""The release's preflight (.ci/preflight.py, release.yml's first job, which every publishing job
needs) against the forge's recorded answers (tests/data/release/preflight/: GET
/repos/{owner}/{repo}/environments/pypi in the REST API's documented shape): it passes only with the
environment `pypi` under required reviewers and IMAGE_REGISTRY set, and refuses each lack by name."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml  # type: ignore[import-untyped]  # pyyaml: the test extra's

pytestmark = pytest.mark.runner_independent

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = ROOT / "tests" / "data" / "release" / "preflight"
REPOSITORY = "example-org/torch-lazylog"
TOKEN = "the-jobs-own-token"


class Forge(http.server.BaseHTTPRequestHandler):
    """Serves one recorded answer for the environment's address, and records what was asked."""

    answer: ClassVar[dict[str, Any]] = {}
    asked: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        type(self).asked.append((self.path, self.headers.get("Authorization")))
        found = self.path == f"/repos/{REPOSITORY}/environments/pypi"
        status, body = (
            (self.answer["status"], self.answer["body"]) if found else (404, {"message": "Not Found"})
        )
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def forge() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _preflight(forge: str, answer: str, registry: str) -> subprocess.CompletedProcess[str]:
    Forge.answer = json.loads((ANSWERS / f"{answer}.json").read_text())
    Forge.asked = []
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        "GITHUB_API_URL": forge,
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_TOKEN": TOKEN,
        "IMAGE_REGISTRY": registry,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "preflight.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_the_settings_in_place_pass_and_name_the_reviewers(forge: str) -> None:
    done = _preflight(forge, "pypi-reviewed", "registry.example")
    assert done.returncode == 0, done.stderr
    assert "requires a review by maintainer-one, release-managers" in done.stdout
    assert "IMAGE_REGISTRY is registry.example" in done.stdout
    assert Forge.asked == [(f"/repos/{REPOSITORY}/environments/pypi", f"Bearer {TOKEN}")]


@pytest.mark.parametrize(
    ("answer", "registry", "refusals"),
    [
        pytest.param("pypi-unreviewed", "registry.example", ["has no required reviewers"], id="no-reviewers"),
        pytest.param("pypi-missing", "registry.example", ["`pypi` does not exist"], id="no-environment"),
        pytest.param("pypi-reviewed", "", ["IMAGE_REGISTRY is unset"], id="no-registry"),
        pytest.param("pypi-missing", " ", ["`pypi` does not exist", "IMAGE_REGISTRY is unset"], id="neither"),
    ],
)
def test_a_missing_setting_refuses_the_run_by_name(
    forge: str, answer: str, registry: str, refusals: list[str]
) -> None:
    done = _preflight(forge, answer, registry)
    assert done.returncode == 1, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("preflight: refused: ")]
    assert len(lines) == len(refusals) and all(r in line for r, line in zip(refusals, lines, strict=True)), (
        done.stderr
    )
    assert done.stderr.splitlines()[-1] == "preflight: nothing was built or uploaded"


def test_every_publishing_job_needs_the_preflight_which_reads_with_its_own_token() -> None:
    """The preflight job reads the environment with the job's token (actions: read, nothing written)
    and the registry variable; every job that publishes or writes needs it."""
    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())["jobs"]
    preflight = jobs["preflight"]
    assert preflight["permissions"] == {"actions": "read", "contents": "read"}
    (run,) = [step for step in preflight["steps"] if "run" in step]
    assert "python3 .ci/preflight.py" in run["run"]
    assert run["env"] == {
        "GITHUB_TOKEN": "${{ github.token }}",
        "IMAGE_REGISTRY": "${{ vars.IMAGE_REGISTRY }}",
    }
    for name, job in jobs.items():
        if "write" in job["permissions"].values():
            needs = job["needs"] if isinstance(job["needs"], list) else [job["needs"]]
            assert "preflight" in needs, name
