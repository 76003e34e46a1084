"""What a shell job may name, checked against the operator's allowlists before it runs.

A write token is not a shell: the executable, each argument, each environment variable and the
working directory of a shell job are checked here, when the job is created (where the creating
process knows the settings) and again by the worker before it starts the child.

- Executables: ``shell_allowed_executables`` (``shell.resolve_executable``).
- Arguments: ``shell_allowed_arguments`` holds ``EXECUTABLE=REGEX`` entries. An executable with
  entries takes only arguments that each match one of its patterns in full. Executables that
  run code named in their arguments (shells, interpreters, ``env``, ``find``, ``tar``, ``git``,
  ...) may only be allowlisted with patterns.
- Environment: a variable must be named in ``shell_allowed_env`` (a name, or ``PREFIX_*``).
  Variables that the dynamic loader, the C library, shells or interpreters read to load code or
  configuration (``LD_PRELOAD``, ``BASH_ENV``, ``PATH``, ``PYTHONPATH``, ...) are refused even
  then.
- Working directory: only ``shell_allowed_cwd`` directories and below, compared after
  resolving symbolic links and ``..``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Read by ld.so, the C library, shells and interpreters to load code or configuration.
UNSAFE_ENV_NAMES = frozenset({
    "BASH_ENV", "ENV", "PATH", "IFS", "CDPATH", "SHELLOPTS", "BASHOPTS", "PS4",
    "PROMPT_COMMAND", "GLOBIGNORE", "HOME", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES",
    "LOCALDOMAIN", "LOCPATH", "NLSPATH", "RES_OPTIONS", "RESOLV_HOST_CONF", "GLIBC_TUNABLES",
    "PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS",
    "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
    "PHPRC", "PHP_INI_SCAN_DIR", "TCLLIBPATH", "OPENSSL_CONF", "OPENSSL_ENGINES",
    "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "EDITOR", "VISUAL", "PAGER", "BROWSER",
})
UNSAFE_ENV_PREFIXES = ("LD_", "DYLD_", "MALLOC_", "BASH_FUNC_", "PYTHON", "GIT_", "LUA_PATH",
                       "LUA_CPATH")

# Executables that run code or commands named in their arguments: allowlisted only with
# argument patterns (by their file name, and the name of the file a link points to).
CODE_RUNNERS = re.compile(
    r"(?:[a-z]*sh|busybox|toybox|python[\d.]*m?|pypy[\d.]*|perl[\d.]*|ruby[\d.]*|irb|node(?:js)?"
    r"|deno|bun|php[\d.]*|lua(?:jit|[\d.]*)|tclsh[\d.]*|wish[\d.]*|expect|[gmn]?awk|sed"
    r"|env|xargs|find|sudo|su|doas|runuser|nice|ionice|nohup|timeout|stdbuf|setsid|chroot"
    r"|taskset|flock|time|watch|script|unshare|nsenter|capsh|strace|ltrace|gdb|make|git|ssh"
    r"|scp|rsync|tar|zip|vim?|ed|less|more|man|docker|podman|kubectl|systemd-run|crontab"
    r"|java|osascript|pwsh|powershell)(?:\.exe)?")


def env_name_problem(name: str) -> str | None:
    """Why no job may set ``name``, whatever the allowlist says; None if it may be allowed."""
    upper = name.upper()
    if upper.startswith("TICKWORK_"):
        return "TICKWORK_* variables are set by tickwork"
    if upper in UNSAFE_ENV_NAMES or upper.startswith(UNSAFE_ENV_PREFIXES):
        return (f"{name} is refused: the loader, the C library, shells or interpreters read "
                "it to load code or configuration")
    return None


def env_allowed(name: str, allowed: Iterable[str]) -> bool:
    for entry in allowed:
        if entry.endswith("*") and name.startswith(entry[:-1]):
            return True
        if name == entry:
            return True
    return False


def cwd_allowed(cwd: str, allowed: Iterable[str]) -> bool:
    """Whether ``cwd``, its links and ``..`` resolved, is one of ``allowed`` or below one."""
    real = os.path.realpath(cwd)
    for entry in allowed:
        root = os.path.realpath(entry)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def parse_argument_patterns(entries: Iterable[str]) -> dict[str, list[re.Pattern[str]]]:
    """``EXECUTABLE=REGEX`` entries by executable; ValueError naming a bad entry."""
    patterns: dict[str, list[re.Pattern[str]]] = {}
    for entry in entries:
        exe, sep, pattern = entry.partition("=")
        if not sep or not exe or not pattern:
            raise ValueError(f"{entry!r} is not EXECUTABLE=REGEX")
        try:
            patterns.setdefault(exe, []).append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"{entry!r}: the pattern is not a regular expression ({exc})") \
                from None
    return patterns


def runs_code(executable: str) -> bool:
    """Whether the executable (a name or path) is one that runs code named in arguments."""
    names = {os.path.basename(executable)}
    if os.path.isabs(executable):
        names.add(os.path.basename(os.path.realpath(executable)))
    return any(CODE_RUNNERS.fullmatch(n) for n in names)


def argument_problem(argv0: str, resolved: str, args: list[str],
                     patterns: Mapping[str, list[re.Pattern[str]]]) -> str | None:
    """Why ``args`` may not be passed to this executable, or None."""
    allowed = patterns.get(argv0) or patterns.get(resolved)
    if allowed is None:
        if runs_code(resolved) or runs_code(argv0):
            return (f"executable {argv0!r} runs code named in its arguments; it may only run "
                    "with argument patterns in shell_allowed_arguments")
        return None
    for index, arg in enumerate(args, 1):
        if not any(p.fullmatch(arg) for p in allowed):
            return (f"argument {index} ({arg[:100]!r}) of {argv0!r} matches none of its "
                    "patterns in shell_allowed_arguments")
    return None


def options_problem(payload: Mapping[str, Any], allowed_env: Iterable[str],
                    allowed_cwd: Iterable[str]) -> tuple[str, str] | None:
    """``(field, reason)`` for an environment variable or working directory the settings do
    not allow, or None."""
    allowed_env = tuple(allowed_env)
    for name in payload.get("env", {}):
        problem = env_name_problem(name)
        if problem is not None:
            return f"payload.env.{name}", problem
        if not env_allowed(name, allowed_env):
            return (f"payload.env.{name}", f"{name} is not in shell_allowed_env; allowlist "
                    "the variables your executables take in the config")
    cwd = payload.get("cwd")
    if cwd is not None and not cwd_allowed(cwd, allowed_cwd):
        return ("payload.cwd", f"{cwd!r} is not in or below a directory of "
                "shell_allowed_cwd")
    return None
