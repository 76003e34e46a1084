"""--namespace and --shared on ``queues set`` and ``limits set``: who owns the queue or key.

There --namespace names the owner, not the namespace the command works in (which a token of
one namespace decides with --api), and TICKWORK_NAMESPACE is not read: an owner is given on
purpose, never by a variable left in the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from tickwork.drivers.limits import KEEP, Owner, check_owner
from tickwork.errors import ValidationError

F = TypeVar("F", bound=Callable[..., Any])


def owner_options(what: str) -> Callable[[F], F]:
    def decorate(command: F) -> F:
        command = click.option("--shared", is_flag=True, default=False,
                               help=f"share the {what} with every namespace again")(command)
        return click.option("--namespace", metavar="NAME", default=None,
                            help=f"give the {what} to this namespace: only its jobs use it "
                            "and only its tokens change it (default: the owner stays)"
                            )(command)

    return decorate


def owner_of(namespace: str | None, *, shared: bool) -> Owner:
    if namespace is not None and shared:
        raise ValidationError("--shared", "give --namespace or --shared, not both")
    if shared:
        return None
    return KEEP if namespace is None else check_owner(namespace, "--namespace")


def owned_by(namespace: str | None) -> str:
    return "" if namespace is None else f" (namespace {namespace})"
