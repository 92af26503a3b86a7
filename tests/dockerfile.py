"""Just enough of a Dockerfile to run its RUN lines exactly as written, with paths mapped to a test tree.

No Docker engine runs here, so the test plays the instructions that matter for the patch step:
ARG defaults, WORKDIR, COPY (from the context or an earlier stage), RUN --mount=type=bind and RUN.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            name = args.split(" AS ")[-1].strip() if " AS " in args.upper() else None
            stages.append(Stage(name))
        elif not stages and keyword == "ARG":
            key, _, value = args.partition("=")
            global_args[key.strip()] = value.strip()
        else:
            stages[-1].instructions.append(Instruction(keyword, " ".join(args.split())))
    return global_args, stages


def substitute(text: str, variables: dict[str, str]) -> str:
    return _VAR.sub(lambda m: variables.get(m[1] or m[2], m[0]), text)


@dataclass
class Emulator:
    context: Path
    paths: dict[str, Path]  # container path prefix -> host path, longest first
    cwd: Path
    log: list[str] = field(default_factory=list)

    def host(self, container: str) -> Path:
        for prefix in sorted(self.paths, key=len, reverse=True):
            if container == prefix or container.startswith(prefix.rstrip("/") + "/"):
                rest = container[len(prefix.rstrip("/")) :].lstrip("/")
                return self.paths[prefix] / rest if rest else self.paths[prefix]
        raise AssertionError(f"no host path for {container}")

    def map_command(self, command: str) -> str:
        for prefix in sorted(self.paths, key=len, reverse=True):
            command = command.replace(prefix, str(self.paths[prefix]))
        return command

    def run_stage(self, stage: Stage, global_args: dict[str, str]) -> None:
        variables = dict(global_args)
        workdir = self.cwd
        for instruction in stage.instructions:
            args = substitute(instruction.args, variables)
            if instruction.keyword == "ARG":
                key, _, value = args.partition("=")
                variables[key.strip()] = value.strip() or global_args.get(key.strip(), "")
            elif instruction.keyword == "WORKDIR":
                workdir = self.host(args)
                workdir.mkdir(parents=True, exist_ok=True)
            elif instruction.keyword == "COPY":
                self._copy(args, workdir)
            elif instruction.keyword == "RUN":
                self.run(args, workdir)

    def _copy(self, args: str, workdir: Path) -> None:
        words = args.split()
        from_stage = words[0].startswith("--from=")
        if from_stage:
            words = words[1:]
        *sources, destination = words
        target = self.host(destination) if destination.startswith("/") else workdir / destination
        for source in sources:
            path = self.host(source) if from_stage else self.context / source
            if path.is_dir():  # a directory's contents go into the destination
                shutil.copytree(path, target, dirs_exist_ok=True)
            elif destination.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / path.name)
            else:
                shutil.copy2(path, target)

    def run(self, command: str, workdir: Path) -> None:
        while command.startswith("--mount="):
            mount, _, command = command.partition(" ")
            options = dict(part.split("=", 1) for part in mount[len("--mount=") :].split(","))
            assert options.get("type") == "bind", mount
            self.paths[options["target"]] = self.context / options.get("source", ".")
        mapped = self.map_command(command)
        self.log.append(mapped)
        done = subprocess.run(
            ["/bin/sh", "-c", mapped], cwd=workdir, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"RUN {command}\n-> {mapped}\n{done.stdout}\n{done.stderr}"
