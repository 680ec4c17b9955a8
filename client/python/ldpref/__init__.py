"""ldpref — Python binding of libldpref, the client of the ldpref service.

Private pairwise preference labels: an annotator's true answer is
randomized on the device (randomized response), signed and sent by the C
library; this package only calls it. See docs/python.md.

    import ldpref
    ldpref.keygen("annotator.key")
    with ldpref.Client("http://127.0.0.1:8080", "annotator.key") as c:
        c.enroll("et_...")
        for task in c.next_tasks(5):
            c.answer(task, prefer_b=True)
"""

from ._lib import library_path
from .client import (
    TIE,
    Admin,
    BatchResult,
    Budget,
    Client,
    Enrollment,
    Progress,
    Receipt,
    Scores,
    Task,
    Turn,
    keygen,
)
from .errors import *  # noqa: F401,F403 — the exception classes
from .errors import LdprefError, error_class, error_name
from . import train

from ._lib import ffi as _ffi, lib as _clib


def library_version() -> str:
    """The loaded libldpref's version ("MAJOR.MINOR.PATCH")."""
    return _ffi.string(_clib.ldpref_version()).decode()


__version__ = "0.5.0"

__all__ = [
    "TIE",
    "Admin",
    "BatchResult",
    "Budget",
    "Client",
    "Enrollment",
    "LdprefError",
    "Progress",
    "Receipt",
    "Scores",
    "Task",
    "Turn",
    "error_class",
    "error_name",
    "keygen",
    "library_path",
    "library_version",
    "train",
]
