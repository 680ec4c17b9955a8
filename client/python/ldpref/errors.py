"""The library's errors as Python exceptions.

Every failure of a libldpref call raises :class:`LdprefError` (or one of its
subclasses) carrying the library's stable error name (``"budget_exceeded"``),
its number (the same as the CLI's exit status) and the message the library
recorded (for a server error, the server's own message). Codes without a
subclass of their own raise :class:`LdprefError` itself, with their name.
"""

from __future__ import annotations

from typing import Dict, Type

from ._lib import ffi, lib


class LdprefError(Exception):
    """A libldpref error: ``name`` (e.g. ``"already_answered"``), ``code``
    (e.g. 60) and ``message``."""

    def __init__(self, code: int, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.code = code
        self.name = name
        self.message = message


_BY_NAME: Dict[str, Type[LdprefError]] = {}


def _named(name: str):
    def register(cls: Type[LdprefError]) -> Type[LdprefError]:
        cls.error_name = name
        _BY_NAME[name] = cls
        return cls

    return register


@_named("invalid_argument")
class InvalidArgument(LdprefError, ValueError):
    """An argument the library refused before sending anything."""


@_named("network_error")
class NetworkError(LdprefError, ConnectionError):
    """The server could not be reached (a signed label stays in the outbox)."""


@_named("unauthorized")
class Unauthorized(LdprefError, PermissionError):
    """No or a wrong operator token."""


@_named("insufficient_scope")
class InsufficientScope(LdprefError, PermissionError):
    """The operator token lacks the endpoint's scope."""


@_named("key_file")
class KeyFileError(LdprefError, OSError):
    """The key file is missing, malformed, or readable by others."""


@_named("not_enrolled")
class NotEnrolled(LdprefError):
    """The key is not enrolled with the server."""


@_named("already_enrolled")
class AlreadyEnrolled(LdprefError):
    """The key is enrolled already."""


@_named("bad_enrollment_token")
class BadEnrollmentToken(LdprefError):
    """The enrollment token is unknown or used."""


@_named("no_task_available")
class NoTask(LdprefError):
    """No task is open for this annotator now (leased to others, or done)."""


@_named("campaign_complete")
class CampaignComplete(LdprefError):
    """Every task of the campaign has all its labels."""


@_named("quota_reached")
class QuotaReached(LdprefError):
    """The annotator's quota in the campaign is used up."""


@_named("already_answered")
class AlreadyAnswered(LdprefError):
    """This ledger answered the task before; nothing new was randomized or sent."""


@_named("unknown_task")
class UnknownTask(LdprefError, LookupError):
    """No such task (or not fetched through this ledger)."""


@_named("task_not_assigned")
class NotAssigned(LdprefError):
    """The task is not assigned to this annotator (or was skipped)."""


@_named("budget_exceeded")
class BudgetExceeded(LdprefError):
    """The campaign's per-annotator epsilon budget is spent."""


@_named("local_budget_exceeded")
class LocalBudgetExceeded(LdprefError):
    """The device's own epsilon cap would be exceeded; nothing was sent."""


@_named("epsilon_out_of_range")
class EpsilonOutOfRange(LdprefError):
    """The own per-label cap is below the campaign's minimum epsilon."""


@_named("not_found")
class NotFound(LdprefError, LookupError):
    """No such endpoint or object."""


@_named("unknown_campaign")
class UnknownCampaign(LdprefError, LookupError):
    """No campaign has this name."""


@_named("unknown_model")
class UnknownModel(LdprefError, LookupError):
    """No model has this version."""


@_named("no_active_model")
class NoActiveModel(LdprefError):
    """No model is being served."""


@_named("no_labels")
class NoLabels(LdprefError):
    """There are no labels to train on or export."""


@_named("training_failed")
class TrainingFailed(LdprefError):
    """The training run failed."""


@_named("cancelled")
class Cancelled(LdprefError):
    """The training run was cancelled."""


@_named("rate_limited")
class RateLimited(LdprefError):
    """The server asks to retry later (429)."""


@_named("server_busy")
class Busy(LdprefError):
    """The server is at a limit; retry later (503)."""


def error_name(code: int) -> str:
    """The library's stable name of an error code ("unknown_error" if none)."""
    return ffi.string(lib.ldpref_error_name(code)).decode()


def make_error(code: int, message: str = "") -> LdprefError:
    """The exception for a library code: its subclass when it has one."""
    name = error_name(code)
    if not message:
        message = ffi.string(lib.ldpref_strerror(code)).decode()
    return _BY_NAME.get(name, LdprefError)(code, name, message)


def error_class(name: str) -> Type[LdprefError]:
    """The exception class raised for an error name (LdprefError when the
    name has no subclass of its own)."""
    return _BY_NAME.get(name, LdprefError)
