"""Agent packages: a folder or zip with ``agent.toml`` and Python code that uses ``mlab_agents.sdk``.

    agent.toml
        name = "my-agent"
        version = "0.3"
        entrypoint = "my_agent"          # a module (or package with __main__) in the folder, run with python -m
        description = "..."
        uses_llm = true
        default_model = "gpt-4o-mini"    # a suggestion shown to people; a run uses only the models it is given
        [config]                         # handed to the agent in its start message
        temperature = 0.2

The code runs only in a sandbox that isolates (bwrap or docker), never in the local one. A package cannot choose
what the platform pays for: the models a run may use come from whoever started it, so a ``[config]`` key that
names a model or an endpoint is refused at import.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from task_bank.archive import extracted
from task_bank.package import TaskPackageError, iter_files, package_digest

from .agents import BUILTIN_AGENTS
from .models import Agent

MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# [config] keys that would choose a model or an endpoint: the run's starter does that, never the package.
MODEL_KEY_RE = re.compile(r"(^|[_-])(models?|endpoints?|base_?url|url|api_?key|api_?key_?env|provider)$", re.I)


class AgentPackageError(Exception):
    """An agent package is malformed; the message says what is wrong and what is expected."""


def agent_manifest_parse(text: str) -> dict:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentPackageError(f"agent.toml is not valid TOML: {exc}") from exc
    known = {"name", "version", "entrypoint", "description", "uses_llm", "default_model", "config"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise AgentPackageError(f"agent.toml: unknown keys {unknown}; expected some of {sorted(known)}")
    for key in ("name", "entrypoint"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise AgentPackageError(f"agent.toml needs {key} (a string)")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,99}", data["name"]):
        raise AgentPackageError(f"agent name {data['name']!r}: use lowercase letters, digits, '-' and '_'")
    if not MODULE_RE.match(data["entrypoint"]):
        raise AgentPackageError(f"entrypoint {data['entrypoint']!r} is not a Python module name")
    if not isinstance(data.get("config", {}), dict):
        raise AgentPackageError("agent.toml: [config] must be a table")
    chooses = sorted(key for key in data.get("config", {}) if MODEL_KEY_RE.search(key))
    if chooses:
        raise AgentPackageError(
            f"agent.toml: [config] {', '.join(chooses)} would choose a model or an endpoint; a run uses only the "
            "models whoever starts it gives it (bench_run --model, --fast-model, --edit-model): remove the key"
        )
    return data


def _entrypoint_exists(root: Path, module: str) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def agent_import(
    *, source: Path, owner: AbstractBaseUser | None = None, visibility: str = Agent.Visibility.PUBLIC
) -> tuple[Agent, bool]:
    """Import an agent package (folder or zip). The same name and version with other files is refused:
    a version names one set of files. A private agent, its runs and steps are shown only to its owner and staff."""
    unpacked = extracted(Path(source))
    try:
        with unpacked as root:
            manifest_path = root / "agent.toml"
            if not manifest_path.is_file():
                raise AgentPackageError("not an agent package: agent.toml is missing")
            data = agent_manifest_parse(manifest_path.read_text())
            if not _entrypoint_exists(root, data["entrypoint"]):
                raise AgentPackageError(
                    f"the entrypoint module {data['entrypoint']} is not in the package "
                    f"(expected {data['entrypoint'].replace('.', '/')}.py)"
                )
            builtin = {spec["name"] for spec in BUILTIN_AGENTS}
            if data["name"] in builtin or Agent.objects.filter(name=data["name"], kind=Agent.Kind.BUILTIN).exists():
                raise AgentPackageError(
                    f"the name {data['name']!r} belongs to a built-in agent; give the package a name of its own "
                    f"(built in: {', '.join(sorted(builtin))})"
                )
            digest = package_digest(root)
            version = str(data.get("version", "1"))
            existing = Agent.objects.filter(name=data["name"], version=version).first()
            if existing is not None:
                if existing.package_digest == digest:
                    return existing, False
                raise AgentPackageError(
                    f"{data['name']}@{version} already exists with other files; give the package a new version"
                )
            dest = Path(settings.BENCH_DATA_DIR) / "agent_packages" / digest
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".tmp-"))
                for rel, path in iter_files(root):
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, tmp / rel)
                    (tmp / rel).chmod(0o644)
                for folder in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
                    folder.chmod(0o755)  # readable by the sandbox user the agent runs as
                tmp.rename(dest)
    except TaskPackageError as exc:
        raise AgentPackageError(str(exc)) from exc
    with transaction.atomic():
        agent = Agent.objects.create(
            name=data["name"],
            version=version,
            kind=Agent.Kind.PACKAGE,
            entrypoint=data["entrypoint"],
            package_digest=digest,
            package_path=str(dest),
            description=str(data.get("description", "")),
            uses_llm=bool(data.get("uses_llm", False)),
            default_model=str(data.get("default_model", "")),
            config=data.get("config", {}),
            owner=owner,
            visibility=visibility,
        )
    return agent, True
