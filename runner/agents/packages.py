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
names a model or an endpoint, at any depth, is refused at import.
"""

from __future__ import annotations

import datetime
import math
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, IntegrityError, transaction

from task_bank.archive import PackageLimits, extracted, upload_saved
from task_bank.package import TaskPackageError, iter_files, package_digest

from ..jobs import smoke_test_enqueue
from ..models import Agent
from .builtin import BUILTIN_AGENTS

RESERVED_NAMES = {"new"}
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# [config] keys that would choose a model or an endpoint: the run's starter does that, never the package.
MODEL_KEY_RE = re.compile(r"(^|[_-])(models?|endpoints?|base_?url|url|api_?key|api_?key_?env|provider)$", re.I)
# The longest text agent.toml may give each field: the Agent model's columns, and the upload forms' description.
MAX_LENGTHS = {"version": 40, "entrypoint": 200, "description": 5000, "default_model": 200}


class AgentPackageError(Exception):
    """An agent package is malformed; the message says what is wrong and what is expected."""


def agent_manifest_parse(text: str) -> dict:
    """agent.toml's keys, each checked for its type and length (an Agent row holds them as they are), ``[config]``
    for values JSON can carry and for keys that would choose a model or an endpoint at any depth."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentPackageError(f"agent.toml is not valid TOML: {exc}") from exc
    known = {
        "name", "version", "entrypoint", "description", "uses_llm", "default_model", "config", "mlagentbench", "aide",
    }  # fmt: skip
    unknown = sorted(set(data) - known)
    if unknown:
        raise AgentPackageError(f"agent.toml: unknown keys {unknown}; expected some of {sorted(known)}")
    if "mlagentbench" in data and "aide" in data:
        raise AgentPackageError("agent.toml: a package runs MLAgentBench's agent or AIDE, not both")
    if "mlagentbench" in data:
        data = _mlagentbench_manifest(data)
    if "aide" in data:
        data = _aide_manifest(data)
    for key in ("name", "entrypoint"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise AgentPackageError(f"agent.toml needs {key} (a string)")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,99}", data["name"]):
        raise AgentPackageError(
            f"agent name {data['name'][:120]!r}: use lowercase letters, digits, '-' and '_' (at most 100)"
        )
    if data["name"] in RESERVED_NAMES:
        raise AgentPackageError(f"agent name {data['name']!r} is reserved (the site's address /agents/new/)")
    version = data.get("version", "1")
    if isinstance(version, bool) or not isinstance(version, str | int | float) or str(version) == "":
        raise AgentPackageError(
            f'agent.toml: version is {_toml_type(version)}; expected a non-empty string such as "1" or "0.3"'
        )
    data["version"] = str(version)
    for key in ("description", "default_model"):
        if not isinstance(data.get(key, ""), str):
            raise AgentPackageError(f"agent.toml: {key} is {_toml_type(data[key])}; expected a string")
    for key, limit in MAX_LENGTHS.items():
        if len(data.get(key, "")) > limit:
            raise AgentPackageError(
                f"agent.toml: {key} is {len(data[key])} characters long; at most {limit} are allowed"
            )
    if not MODULE_RE.match(data["entrypoint"]):
        raise AgentPackageError(f"entrypoint {data['entrypoint']!r} is not a Python module name")
    if not isinstance(data.get("uses_llm", False), bool):
        raise AgentPackageError(f"agent.toml: uses_llm is {_toml_type(data['uses_llm'])}; expected true or false")
    if not isinstance(data.get("config", {}), dict):
        raise AgentPackageError("agent.toml: [config] must be a table")
    _config_check(data.get("config", {}))
    return data


#: The entry point of a package of MLAgentBench's own code: the adapter that runs its agent class unchanged.
MLAGENTBENCH_ADAPTER = "mlab_agents.mlagentbench"
#: The arguments of MLAgentBench's runner.py an ``[mlagentbench.args]`` table may set: the agent's, not the models
#: (a run's models are whoever starts it) nor the task, the folders or the limits (the platform's).
MLAGENTBENCH_ARGS = {
    "agent_max_steps": int, "edit_script_llm_max_tokens": int, "actions_remove_from_prompt": list,
    "actions_add_to_prompt": list, "retrieval": bool, "valid_format_entires": list, "max_steps_in_context": int,
    "max_observation_steps_in_context": int, "max_retries": int, "langchain_agent": str,
}  # fmt: skip


def _mlagentbench_manifest(data: dict) -> dict:
    """A package of MLAgentBench's code: ``[mlagentbench]`` names the agent class (and ``args``, runner.py's agent
    arguments); the entry point is the adapter (``mlab_agents.mlagentbench``), the agent asks for models, and the
    table reaches the adapter in the start message's config."""
    table = data["mlagentbench"]
    if not isinstance(table, dict) or not isinstance(table.get("agent"), str) or not table["agent"].isidentifier():
        raise AgentPackageError(
            "agent.toml: [mlagentbench] needs agent, the name of a class in MLAgentBench/agents/ (such as "
            '"ResearchAgent")'
        )
    unknown = sorted(set(table) - {"agent", "args"})
    if unknown:
        raise AgentPackageError(f"agent.toml: unknown keys {unknown} in [mlagentbench]; expected agent, args")
    args = table.get("args", {})
    if not isinstance(args, dict):
        raise AgentPackageError("agent.toml: [mlagentbench.args] must be a table")
    for key, value in args.items():
        kind = MLAGENTBENCH_ARGS.get(key)
        if kind is None:
            raise AgentPackageError(
                f"agent.toml: [mlagentbench.args] {key} is not one of runner.py's agent arguments that a package may "
                f"set ({', '.join(sorted(MLAGENTBENCH_ARGS))}); the models are the run's"
            )
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise AgentPackageError(
                f"agent.toml: [mlagentbench.args] {key} is {_toml_type(value)}; expected {kind.__name__}"
            )
    if data.get("entrypoint", MLAGENTBENCH_ADAPTER) != MLAGENTBENCH_ADAPTER:
        raise AgentPackageError(
            f"agent.toml: a package with [mlagentbench] runs through {MLAGENTBENCH_ADAPTER}; leave entrypoint out"
        )
    config = dict(data.get("config") or {})
    config["mlagentbench"] = {"agent": table["agent"], "args": dict(args)}
    return {k: v for k, v in data.items() if k != "mlagentbench"} | {
        "entrypoint": MLAGENTBENCH_ADAPTER, "uses_llm": data.get("uses_llm", True), "config": config,
    }  # fmt: skip


#: The entry point of a package that runs AIDE (``aideml``, installed beside the platform): its adapter.
AIDE_ADAPTER = "mlab_agents.aide"


def _aide_manifest(data: dict) -> dict:
    """A package that runs AIDE: ``[aide.config]`` sets keys of AIDE's own configuration (its ``config.yaml``, dotted:
    ``"agent.steps" = 8``), never its models (the run's) nor its folders (the platform's); the entry point is the
    adapter (``mlab_agents.aide``) and the table reaches it in the start message's config."""
    table = data["aide"]
    if not isinstance(table, dict) or sorted(set(table) - {"config"}):
        raise AgentPackageError("agent.toml: [aide] may hold only [aide.config], keys of AIDE's configuration")
    settings_ = table.get("config", {})
    if not isinstance(settings_, dict):
        raise AgentPackageError("agent.toml: [aide.config] must be a table")
    for key, value in settings_.items():
        if not re.fullmatch(r"agent(\.[a-z_]+)+|exec\.timeout", key):
            raise AgentPackageError(
                f"agent.toml: [aide.config] {key!r} is not a key of AIDE's agent settings a package may set (such "
                'as "agent.steps" or "agent.search.num_drafts", or "exec.timeout"); folders and reports are the '
                "platform's"
            )
        if key.endswith(".model"):
            raise AgentPackageError(f"agent.toml: [aide.config] {key!r} chooses a model; a run's models are its own")
        if isinstance(value, dict | list):
            raise AgentPackageError(f"agent.toml: [aide.config] {key!r} is {_toml_type(value)}; expected a value")
    if data.get("entrypoint", AIDE_ADAPTER) != AIDE_ADAPTER:
        raise AgentPackageError(f"agent.toml: a package with [aide] runs through {AIDE_ADAPTER}; leave entrypoint out")
    config = dict(data.get("config") or {})
    config["aide"] = {"config": dict(settings_)}
    return {k: v for k, v in data.items() if k != "aide"} | {
        "entrypoint": AIDE_ADAPTER, "uses_llm": data.get("uses_llm", True), "config": config,
    }  # fmt: skip


def _mlagentbench_check(root: Path, agent: str) -> None:
    """The package holds MLAgentBench's folder with its schema, its actions, its environment and a module of agents/
    defining the class."""
    folder = root / "MLAgentBench"
    needed = ["schema.py", "low_level_actions.py", "high_level_actions.py", "environment.py", "agents/__init__.py"]
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise AgentPackageError(
            f"a package with [mlagentbench] holds MLAgentBench's package folder as its repository has it; "
            f"MLAgentBench/{', MLAgentBench/'.join(missing)} is missing"
        )
    defining = re.compile(rf"^class {re.escape(agent)}\b", re.MULTILINE)
    if not any(defining.search(path.read_text(errors="replace")) for path in (folder / "agents").glob("*.py")):
        raise AgentPackageError(f"[mlagentbench] agent {agent!r}: no module of MLAgentBench/agents/ defines it")


def _config_check(config: dict) -> None:
    """``[config]`` carries only what JSON can, and no key that would choose a model or an endpoint, at any depth."""
    chooses = []
    for path, key, value in _config_walk(config, "config"):
        if key is not None and MODEL_KEY_RE.search(key):
            chooses.append(path)
        if isinstance(value, datetime.date | datetime.time):
            raise AgentPackageError(
                f"agent.toml: {path} is a TOML date or time; [config] reaches the agent as JSON, which has none: "
                "write it as a string"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise AgentPackageError(
                f"agent.toml: {path} is {value}; [config] reaches the agent as JSON, which has only finite numbers"
            )
    if chooses:
        raise AgentPackageError(
            f"agent.toml: {', '.join(chooses)} would choose a model or an endpoint; a run uses only the "
            "models whoever starts it gives it (bench_run --model, --fast-model, --edit-model): remove the key"
        )


def _toml_type(value: object) -> str:
    """What a TOML value is, in TOML's words, for a message: "a table", "an empty string"."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, datetime.date | datetime.time):
        return "a date or time"
    if isinstance(value, int | float):
        return "a number"
    return "an empty string" if value == "" else "a string"


def _config_walk(value: object, path: str, key: str | None = None):
    """Every value in ``[config]`` at any depth, with its dotted path (``config.llm.model``, an array's items as
    ``config.tools[0]``) and, for a table's entry, its key."""
    yield path, key, value
    if isinstance(value, dict):
        for child_key, child in value.items():
            yield from _config_walk(child, f"{path}.{child_key}", child_key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _config_walk(child, f"{path}[{index}]")


def _entrypoint_exists(root: Path, module: str) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def agent_import(
    *,
    source: Path,
    owner: AbstractBaseUser | None = None,
    visibility: str = Agent.Visibility.PUBLIC,
    description: str | None = None,
    only_own_names: bool = False,
    smoke_test: bool = False,
) -> tuple[Agent, bool]:
    """Import an agent package (folder or zip); returns the agent and whether it is new. The same name and version
    with the same files is the agent already imported; with other files it is refused: a version names one set of
    files. A private agent, its runs and steps are shown only to its owner and staff.

    An upload passes ``only_own_names`` (a name that has versions of someone else's, or of nobody's, is refused)
    and ``smoke_test``: the agent is stored waiting for its smoke test (``Agent.Smoke.PENDING``), which a worker
    runs (``runner.agents.smoke.agent_smoke_run``); no run of it is queued before it passes. A version whose smoke
    test failed never ran: uploading it again tests it again, with the same files or with new ones in their place.
    ``description`` replaces agent.toml's."""
    unpacked = extracted(Path(source), expected="an agent folder with agent.toml", limits=agent_package_limits())
    try:
        with unpacked as root:
            data = _manifest_read(root)
            _name_check(data, owner=owner, only_own_names=only_own_names)
            digest = package_digest(root)
            existing = Agent.objects.filter(name=data["name"], version=data["version"]).first()
            retest = smoke_test and existing is not None and existing.smoke_state == Agent.Smoke.FAILED
            if existing is not None and existing.package_digest == digest:
                return (_smoke_again(existing) if retest else existing), False
            if existing is not None and not retest:
                raise _version_taken(data)
            dest, placed = _package_place(root, digest=digest)
    except TaskPackageError as exc:
        raise AgentPackageError(str(exc)) from exc
    fields = _agent_fields(
        data,
        digest=digest,
        dest=dest,
        description=data.get("description", "") if description is None else description,
        smoke_test=smoke_test,
    )
    if retest:
        return _agent_replace(existing, fields, placed=placed), True
    return _agent_create(fields, owner=owner, visibility=visibility, placed=placed)


def _agent_fields(data: dict, *, digest: str, dest: Path, description: str, smoke_test: bool) -> dict:
    """An Agent row's fields for the package in ``dest``: waiting for its smoke test when one is asked for."""
    return {
        "name": data["name"],
        "version": data["version"],
        "kind": Agent.Kind.PACKAGE,
        "entrypoint": data["entrypoint"],
        "package_digest": digest,
        "package_path": str(dest),
        "description": description,
        "uses_llm": data.get("uses_llm", False),
        "default_model": data.get("default_model", ""),
        "config": data.get("config", {}),
        **_smoke_fields(Agent.Smoke.PENDING if smoke_test else Agent.Smoke.NONE),
    }


def _smoke_fields(state: str) -> dict:
    return {
        "smoke_state": state,
        "smoke_error": "",
        "smoke_attempts": 0,
        "smoke_sent_at": None,
        "smoke_tested_at": None,
    }


def _smoke_again(agent: Agent) -> Agent:
    """The agent whose smoke test failed, waiting for a new one (its files are unchanged)."""
    Agent.objects.filter(pk=agent.pk, smoke_state=Agent.Smoke.FAILED).update(**_smoke_fields(Agent.Smoke.PENDING))
    agent.refresh_from_db()
    return agent


def _agent_create(fields: dict, *, owner: AbstractBaseUser | None, visibility: str, placed: bool) -> tuple[Agent, bool]:
    """The agent's row for the package in ``fields``, and True; the agent another import wrote meanwhile with the
    same name, version and files, and False. The folder this import placed goes when no row uses it."""
    dest, digest = Path(fields["package_path"]), fields["package_digest"]
    try:
        with transaction.atomic():
            agent = Agent.objects.create(**fields, owner=owner, visibility=visibility)
    except IntegrityError:  # the same name and version, written meanwhile by another import
        existing = Agent.objects.get(name=fields["name"], version=fields["version"])
        if existing.package_digest != digest:
            _remove_unused(dest, digest, placed=placed)
            raise _version_taken(fields) from None
        return existing, False
    except BaseException:
        _remove_unused(dest, digest, placed=placed)
        raise
    return agent, True


def _agent_replace(agent: Agent, fields: dict, *, placed: bool) -> Agent:
    """Put new files in the place of a version whose smoke test failed (it never ran), waiting for a new test; the
    old files go when no row uses them. Refused if the version was tested again meanwhile."""
    old = Path(agent.package_path), agent.package_digest
    replaced = Agent.objects.filter(pk=agent.pk, smoke_state=Agent.Smoke.FAILED, package_digest=old[1]).update(**fields)
    if not replaced:
        _remove_unused(Path(fields["package_path"]), fields["package_digest"], placed=placed)
        raise _version_taken(fields)
    _remove_unused(*old, placed=True)
    agent.refresh_from_db()
    return agent


def _manifest_read(root: Path) -> dict:
    """The unpacked package's agent.toml, parsed and checked, its entrypoint module in the package."""
    manifest_path = root / "agent.toml"
    if not manifest_path.is_file():
        raise AgentPackageError("not an agent package: agent.toml is missing")
    try:
        text = manifest_path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentPackageError(
            f"agent.toml is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); save it as UTF-8"
        ) from None
    data = agent_manifest_parse(text)
    mlagentbench = (data.get("config") or {}).get("mlagentbench")
    if data["entrypoint"] == MLAGENTBENCH_ADAPTER and isinstance(mlagentbench, dict):
        _mlagentbench_check(root, mlagentbench["agent"])
    elif data["entrypoint"] == AIDE_ADAPTER and isinstance((data.get("config") or {}).get("aide"), dict):
        pass  # AIDE's code is installed beside the platform, not in the package
    elif not _entrypoint_exists(root, data["entrypoint"]):
        raise AgentPackageError(
            f"the entrypoint module {data['entrypoint']} is not in the package "
            f"(expected {data['entrypoint'].replace('.', '/')}.py)"
        )
    return data


def _name_check(data: dict, *, owner: AbstractBaseUser | None, only_own_names: bool) -> None:
    """Refuse a built-in agent's name, and with ``only_own_names`` a name with versions not ``owner``'s."""
    builtin = {spec["name"] for spec in BUILTIN_AGENTS}
    if data["name"] in builtin or Agent.objects.filter(name=data["name"], kind=Agent.Kind.BUILTIN).exists():
        raise AgentPackageError(
            f"the name {data['name']!r} belongs to a built-in agent; give the package a name of its own "
            f"(built in: {', '.join(sorted(builtin))})"
        )
    if only_own_names:
        others = Agent.objects.filter(name=data["name"]).exclude(owner=owner) if owner else Agent.objects.none()
        if owner is None or others.exists():
            raise AgentPackageError(
                f"the name {data['name']!r} belongs to another submitter's agent; only its owner can add "
                "versions: give the package a name of its own in agent.toml"
            )


def _version_taken(data: dict) -> AgentPackageError:
    return AgentPackageError(
        f"{data['name']}@{data['version']} already exists with other files; give the package a new version"
    )


def _package_place(root: Path, *, digest: str) -> tuple[Path, bool]:
    """The package's folder in the data folder, named by its digest; returns it and whether this import put it in
    place (and so removes it if the agent's row is not written)."""
    dest = Path(settings.BENCH_DATA_DIR) / "agent_packages" / digest
    if dest.exists():
        return dest, False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".tmp-"))
    try:
        for rel, path in iter_files(root):
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, tmp / rel)
            (tmp / rel).chmod(0o644)
        for folder in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)  # readable by the sandbox user the agent runs as
        try:
            tmp.rename(dest)
            return dest, True
        except OSError:
            if not dest.is_dir():  # else: the same files, stored meanwhile by another upload
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            return dest, False
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def agent_package_limits() -> PackageLimits:
    """An agent package's size limits: ``BENCH_AGENT_MAX_UNPACKED_BYTES`` in all, a task package's per file and
    file count."""
    return PackageLimits(
        max_bytes=settings.BENCH_AGENT_MAX_UNPACKED_BYTES,
        max_file_bytes=settings.BENCH_TASK_MAX_FILE_BYTES,
        max_files=settings.BENCH_TASK_MAX_FILES,
        max_bytes_setting="BENCH_AGENT_MAX_UNPACKED_BYTES",
    )


def _remove_unused(dest: Path, digest: str, *, placed: bool) -> None:
    """Remove the package folder an import put in place when its row was not written, unless a row of another
    import uses the same files meanwhile."""
    if not placed:
        return
    try:
        used = Agent.objects.filter(package_digest=digest).exists()
    except DatabaseError:  # the database that refused the row cannot answer either: nobody wrote one meanwhile
        used = False
    if not used:
        shutil.rmtree(dest, ignore_errors=True)


def agent_upload(
    *, upload: UploadedFile, submitter: AbstractBaseUser, visibility: str, description: str = ""
) -> tuple[Agent, bool]:
    """A submitter's upload (a zip): imported as ``import_agent`` does, under a name of the submitter's own, and
    smoke-tested by a worker (the job is sent once this commits); returns the agent and whether it is new (identical
    files: the agent uploaded before, tested again if its test had failed)."""
    if upload.size > settings.BENCH_AGENT_UPLOAD_MAX_BYTES:
        raise AgentPackageError(
            f"the upload is {upload.size} bytes; an agent package may be at most "
            f"{settings.BENCH_AGENT_UPLOAD_MAX_BYTES} bytes (BENCH_AGENT_UPLOAD_MAX_BYTES)"
        )
    if visibility not in Agent.Visibility.values:
        raise AgentPackageError(f"visibility {visibility!r}: expected one of {', '.join(Agent.Visibility.values)}")
    with upload_saved(upload, prefix="agent-upload-") as path:
        agent, created = agent_import(
            source=path,
            owner=submitter,
            visibility=visibility,
            description=description.strip() or None,
            only_own_names=True,
            smoke_test=True,
        )
    if agent.smoke_state == Agent.Smoke.PENDING and agent.smoke_sent_at is None:
        smoke_test_enqueue(agent.pk)
    return agent, created
