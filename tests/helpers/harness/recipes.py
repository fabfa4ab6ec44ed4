"""How each harness is configured and run against a base URL, and how its run ends.

Every run gets a fresh git repository and its own HOME, XDG and TMPDIR under the test's folder
(or, with `again=True`, those of an earlier run in the same folder, to continue its session);
the environment is built from scratch (PATH and LANG only), with each harness's switches against
calls to anything but loopback (docs/harnesses/). stdin is /dev/null: opencode waits for EOF otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.harness.install import executable

HERE = Path(__file__).parent
TIMEOUT = 240.0
# Debian's libfaketime: a harness run on another date (not Codex: its binary is static, so the
# library cannot be preloaded into it)
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@dataclass
class Recipe:
    name: str
    tool: str  # the harness's shell tool
    arguments: Callable[[str], dict[str, Any]]  # command -> the tool's arguments
    # how the live model ends the run: {"text": ...} or {"tool": ..., "arguments": ...}
    finish: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    api: str = "chat"  # the API it speaks: chat | responses | anthropic | gemini | vertex | bedrock


VERTEX_PROJECT, VERTEX_REGION = "replay-proj", "us-east5"
# the model Claude Code asks for on each cloud (ANTHROPIC_MODEL): it names the URL
CLOUD_MODELS = {"vertex": "claude-sonnet-4-5@20250929",
                "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}  # fmt: skip

RECIPES = {
    "opencode": Recipe(
        "opencode",
        "bash",
        lambda c: {"command": c, "description": "run a step"},
        {"text": "All done."},
    ),
    "mini": Recipe(
        "mini",
        "bash",
        lambda c: {"command": c},
        {"tool": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}},
    ),
    "agents-run": Recipe(
        "agents-run",
        "run_shell",
        lambda c: {"command": c},
        {"text": "All done."},
        {"AGENTS_MODE": "run"},
    ),
    "agents-streamed": Recipe(
        "agents-streamed",
        "run_shell",
        lambda c: {"command": c},
        {"text": "All done."},
        {"AGENTS_MODE": "streamed"},
    ),
    "codex": Recipe(
        "codex", "exec_command", lambda c: {"cmd": c}, {"text": "All done."}, api="responses"
    ),
    "claude": Recipe(
        "claude",
        "Bash",
        lambda c: {"command": c, "description": "run a step"},
        {"text": "All done."},
        api="anthropic",
    ),
    # Claude Code through an LLM gateway to Anthropic's models on Google Vertex AI and Amazon
    # Bedrock (its docs' recipe: the gateway keeps the cloud credentials, SKIP_*_AUTH)
    "gemini": Recipe(
        "gemini",
        "run_shell_command",
        # Gemini CLI blocks "$(" anywhere in a command (as command substitution), $((...)) too
        lambda c: {"command": c.replace("echo $((6 * 7))", "expr 6 '*' 7"), "description": "step"},
        {"text": "All done."},
        api="gemini",
    ),
    "openhands": Recipe(
        "openhands",
        "terminal",
        lambda c: {"command": c},
        {"tool": "finish", "arguments": {"message": "All done."}},
    ),
}
# Claude Code through an LLM gateway to Anthropic's models on Google Vertex AI and Amazon
# Bedrock (its docs' recipe: the gateway keeps the cloud credentials, SKIP_*_AUTH): its recipe,
# in another API
for _cloud in ("vertex", "bedrock"):
    RECIPES[f"claude-{_cloud}"] = dataclasses.replace(
        RECIPES["claude"], name=f"claude-{_cloud}", api=_cloud
    )


# mini-swe-agent in text mode: no tools; the action is a ```mswea_bash_command block in the answer,
# and the output comes back as a user message (not in RECIPES: it has no tool to script)
def mini_action(command: str, thought: str = "next step") -> str:
    """An answer mini's text mode runs: a thought, then exactly one fenced command."""
    return f"THOUGHT: {thought}.\n\n```mswea_bash_command\n{command}\n```"


MINI_TEXT = Recipe(
    "mini-text",
    "",
    lambda c: {"command": c},
    {"text": mini_action("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "done")},
)


# the built-in OpenAI providers, which open a WebSocket to /v1/responses first (not in RECIPES:
# FlakyFront, which fails turn 2 once in the main test, speaks HTTP only)
CODEX_SOCKET = Recipe(
    "codex-ws", "exec_command", lambda c: {"cmd": c}, {"text": "All done."}, api="responses"
)
OPENCODE_SOCKET = Recipe(
    "opencode-ws",
    "bash",
    lambda c: {"command": c, "description": "run a step"},
    {"text": "All done."},
    api="responses",
)


def install_name(recipe: str) -> str:
    if recipe == "mini-text":
        return "mini"
    if recipe.startswith("claude-"):
        return "claude"
    if recipe.endswith("-ws"):
        return recipe.removesuffix("-ws")
    return "agents" if recipe.startswith("agents") else recipe


@dataclass
class Run:
    returncode: int
    seconds: float
    repo: Path
    logs: Path  # stdout.log and stderr.log of the harness

    def tail(self, lines: int = 60) -> str:
        parts = []
        for name in ("stdout.log", "stderr.log"):
            text = (self.logs / name).read_text(errors="replace").splitlines()[-lines:]
            parts.append(
                f"--- {name} (last {lines} lines, kept in {self.logs}) ---\n" + "\n".join(text)
            )
        return "\n".join(parts)


def make_repo(repo: Path) -> None:
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "existing.txt").write_text("old value\n")
    subprocess.run([*git, "add", "existing.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)


def assert_rebuilt(repo: Path, why: str = "") -> None:
    """The three recorded steps (the tests' STEPS) ran for real in `repo`, each exactly once."""
    assert (repo / "runs.log").read_text() == "step1\nstep2\nstep3\n", why
    assert (repo / "created.txt").read_text() == "created\n"
    assert (repo / "answer.txt").read_text() == "42\n"
    diff = subprocess.run(
        ["git", "-C", str(repo), "diff", "existing.txt"], capture_output=True, text=True, check=True
    ).stdout
    assert "-old value" in diff and "+new value" in diff


def _environment(folder: Path) -> dict[str, str]:
    home = folder / "home"
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        TMPDIR=str(folder / "tmp"),
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
    )
    for key in (
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "TMPDIR",
    ):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def command(
    recipe: Recipe,
    base_v1: str,
    folder: Path,
    task: str,
    extra_args: Sequence[str] = (),
    clock: str | None = None,
    track: str = "newest",
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one run; `extra_args` go before the task (opencode) or are
    more tools to allow after `--allowedTools Bash` (Claude Code: `Agent`), for no other harness;
    `clock` shifts the harness's clock (libfaketime's FAKETIME, e.g. "+40d"); `track` is the
    harness version's (versions.py)."""
    if extra_args and recipe.name not in ("opencode", "claude", "claude-vertex", "claude-bedrock"):
        raise ValueError(
            f"extra_args are only supported for opencode and claude, not {recipe.name}"
        )
    root = base_v1.removesuffix("/v1")
    env = _environment(folder)
    env.update(recipe.env)
    if clock is not None:
        if not FAKETIME.exists():
            raise FileNotFoundError(f"{FAKETIME} is missing: apt-get install libfaketime")
        env.update(LD_PRELOAD=str(FAKETIME), FAKETIME=clock)
    exe = str(executable(install_name(recipe.name), track))
    if recipe.name == "opencode":
        config = {
            "provider": {
                # the id must not start with "opencode": those send x-opencode-session instead
                "replay": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Replay",
                    "options": {"baseURL": base_v1, "apiKey": "sk-harness"},
                    "models": {"agent-model": {"name": "Agent model", "tool_call": True}},
                }
            },
            "model": "replay/agent-model",
            "small_model": "replay/agent-model",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        }
        (folder / "opencode.json").write_text(json.dumps(config))
        env.update(
            OPENCODE_CONFIG=str(folder / "opencode.json"),
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_MODELS_FETCH="1",  # else it fetches models.dev
            OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_CLAUDE_CODE="1",
            OPENCODE_DISABLE_TERMINAL_TITLE="1",
            npm_config_offline="true",  # else it installs @opencode-ai/plugin from npm in the background
        )
        return [exe, "run", *extra_args, task], env
    if recipe.name == "opencode-ws":
        # its own OpenAI provider with stored credentials: Responses over a WebSocket, as its
        # beta and dev builds do by default; the default plugins hold that provider
        config = {
            "provider": {"openai": {"options": {"baseURL": base_v1}}},
            "model": "openai/gpt-5.2",
            "small_model": "openai/gpt-5.2",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        }
        (folder / "opencode.json").write_text(json.dumps(config))
        auth = Path(env["XDG_DATA_HOME"]) / "opencode/auth.json"
        auth.parent.mkdir(parents=True, exist_ok=True)
        auth.write_text(json.dumps({"openai": {"type": "api", "key": "sk-harness"}}))
        env.update(
            OPENCODE_CONFIG=str(folder / "opencode.json"),
            OPENCODE_EXPERIMENTAL_WEBSOCKETS="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_CLAUDE_CODE="1",
            OPENCODE_DISABLE_TERMINAL_TITLE="1",
            npm_config_offline="true",
        )
        return [exe, "run", task], env
    if recipe.name in ("mini", "mini-text"):
        env.update(
            MSWEA_CONFIGURED="true",
            MSWEA_GLOBAL_CONFIG_DIR=str(folder / "mswea"),
            MSWEA_COST_TRACKING="ignore_errors",  # else the cost lookup of an unknown model aborts
            MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT="3",
            LITELLM_LOCAL_MODEL_COST_MAP="True",  # else litellm fetches its price map from GitHub
        )
        mode = ["-c", "mini.yaml"]
        if recipe.name == "mini-text":
            mode = ["-c", "mini_textbased.yaml", "--model-class", "litellm_textbased"]
        argv = [
            exe, "--yolo", "--exit-immediately", "-m", "openai/agent-model", *mode,
            "-c", f"model.model_kwargs.api_base={base_v1}", "-c", "model.model_kwargs.api_key=sk-harness",
            "-c", "agent.step_limit=12", "-o", str(folder / "traj.json"), "-t", task,
        ]  # fmt: skip
        return argv, env
    if recipe.name.startswith("agents"):
        env.update(LLM_BASE=root, TASK=task, OPENAI_AGENTS_DISABLE_TRACING="1")
        return [exe, str(HERE / "agents_task.py")], env
    if recipe.name in ("codex", "codex-ws"):
        home = folder / "codex-home"
        home.mkdir(exist_ok=True)
        quiet = [
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            "[analytics]",
            "enabled = false",
            "[features]",
            "plugins = false",  # else a plugin sync reaches github.com and chatgpt.com
        ]
        if recipe.name == "codex-ws":  # the documented one-line recipe: its built-in provider
            config = ['model = "gpt-5.2"', f'openai_base_url = "{base_v1}"', *quiet]
            env.update(OPENAI_API_KEY="sk-harness")
        else:  # a provider of its own, over HTTP
            config = ['model = "agent-model"', 'model_provider = "replay"', *quiet,
                      "[model_providers.replay]", 'name = "Replay"', f'base_url = "{base_v1}"',
                      'env_key = "REPLAY_API_KEY"', 'wire_api = "responses"',
                      "request_max_retries = 2", "stream_max_retries = 2"]  # fmt: skip
            env.update(REPLAY_API_KEY="sk-harness")
        (home / "config.toml").write_text("\n".join([*config, ""]))
        env.update(CODEX_HOME=str(home))
        return [exe, "exec", "--skip-git-repo-check", "--color", "never", task], env
    if recipe.name.startswith("claude"):
        if recipe.name == "claude-vertex":
            env.update(
                CLAUDE_CODE_USE_VERTEX="1",
                CLAUDE_CODE_SKIP_VERTEX_AUTH="1",
                ANTHROPIC_VERTEX_BASE_URL=base_v1,  # with /v1: it adds /projects/...
                ANTHROPIC_VERTEX_PROJECT_ID=VERTEX_PROJECT,
                CLOUD_ML_REGION=VERTEX_REGION,
                ANTHROPIC_MODEL=CLOUD_MODELS["vertex"],
            )
        elif recipe.name == "claude-bedrock":
            env.update(
                CLAUDE_CODE_USE_BEDROCK="1",
                CLAUDE_CODE_SKIP_BEDROCK_AUTH="1",
                ANTHROPIC_BEDROCK_BASE_URL=root,  # without /v1: it adds /model/...
                AWS_REGION="us-east-1",
                ANTHROPIC_MODEL=CLOUD_MODELS["bedrock"],
            )
        else:
            env.update(ANTHROPIC_BASE_URL=root, ANTHROPIC_API_KEY="sk-ant-harness")  # no /v1
        env.update(
            CLAUDE_CONFIG_DIR=str(folder / "home/.claude"),
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        # --allowedTools takes several values: the prompt must not follow it; the session
        # transcript (its own log) goes to CLAUDE_CONFIG_DIR/projects
        return [exe, "-p", task, "--allowedTools", "Bash", *extra_args], env
    if recipe.name == "gemini":
        home = folder / "gemini-home"
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        settings = {
            # with GOOGLE_GEMINI_BASE_URL alone it picks the "gateway" auth, which headless
            # mode refuses (exit 41): the API-key auth keeps the base URL
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},  # else usage stats go to Google
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "ide": {"enabled": False},
            # a pinned model: "auto" asks a router model first (a side call) on every prompt
            "model": {
                "name": "gemini-2.5-pro",
                "skipNextSpeakerCheck": True,
                "disableLoopDetection": True,
            },
        }
        (home / ".gemini/settings.json").write_text(json.dumps(settings))
        env.update(
            GEMINI_CLI_HOME=str(home),
            GEMINI_API_KEY="sk-harness-gemini",
            GOOGLE_GEMINI_BASE_URL=root,  # without /v1: it adds /v1beta itself
        )
        argv = [exe, "-p", task, "--approval-mode", "yolo", "--skip-trust", "-m", "gemini-2.5-pro"]
        return argv, env
    if recipe.name == "openhands":
        env.update(
            LLM_BASE=root,
            TASK=task,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENHANDS_SUPPRESS_BANNER="1",
            # a short folder: a tmux socket path over 107 bytes makes OpenHands fall back to /tmp
            TMUX_TMPDIR=tempfile.mkdtemp(prefix="oh-tmux-", dir="/tmp"),
            PERSISTENCE_DIR=str(folder / "conversations"),  # its event store: its own log
        )
        return [exe, str(HERE / "openhands_task.py")], env
    raise KeyError(recipe.name)


def run(
    recipe: Recipe,
    base_v1: str,
    folder: Path,
    task: str,
    *,
    extra_args: Sequence[str] = (),
    again: bool = False,
    clock: str | None = None,
    track: str = "newest",
) -> Run:
    """Run the harness to its end, with a hard timeout; its output is kept in folder/logs.

    again=True runs it once more in the folder of an earlier run: the same repo, HOME and XDG
    folders (so `opencode run --continue` finds the session), with the output in folder/logs-2,
    folder/logs-3, ...
    """
    repo = folder / "repo"
    if again:
        if not repo.is_dir():
            raise FileNotFoundError(f"again=True needs an earlier run in {folder}")
    else:
        make_repo(repo)
    argv, env = command(recipe, base_v1, folder, task, extra_args, clock, track)
    logs = folder / "logs"
    n = 1
    while again and logs.exists():
        n += 1
        logs = folder / f"logs-{n}"
    logs.mkdir()
    started = time.monotonic()
    with (logs / "stdout.log").open("w") as out, (logs / "stderr.log").open("w") as err:
        process = subprocess.Popen(
            argv,
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
            err.write(f"\n[test] killed after the {TIMEOUT:.0f} s timeout\n")
        finally:
            if env.get("TMUX_TMPDIR", "").startswith("/tmp/oh-tmux-"):
                subprocess.run(
                    ["tmux", "-L", "default", "kill-server"],
                    env=env,
                    capture_output=True,
                    check=False,
                )
                shutil.rmtree(env["TMUX_TMPDIR"], ignore_errors=True)
    return Run(returncode, round(time.monotonic() - started, 1), repo, logs)


def finished_its_own_way(recipe: Recipe, result: Run, folder: Path) -> bool:
    if result.returncode != 0:
        return False
    if recipe.name in ("mini", "mini-text"):  # mini exits 0 on its step limit too
        info = json.loads((folder / "traj.json").read_text()).get("info", {})
        return bool(info.get("exit_status") == "Submitted")
    return True
