"""The offline trainer, ``ldpref-train``, through subprocess calls.

The trainer is a C program; these functions build its command line from
keyword arguments (``l2=0.1`` becomes ``--l2 0.1``, ``max_iter=50``
``--max-iter 50``, ``progress=True`` the flag ``--progress``; ``False`` or
``None`` leave an option out) and parse what it prints.

The binary is found, first found wins, at ``$LDPREF_TRAIN``; in the build
directory of the ldpref checkout the package belongs to (``$LDPREF_BUILD``,
default ``build``); on ``PATH``; in ``$LDPREF_PREFIX/bin`` or
``/usr/local/bin``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ._lib import checkout_root

PathLike = Union[str, "os.PathLike[str]"]


class TrainError(RuntimeError):
    """ldpref-train failed: ``returncode`` (1 runtime failure, 2 usage error),
    ``stderr`` (its messages) and ``args`` (the command line)."""

    def __init__(self, argv: List[str], returncode: int, stderr: str) -> None:
        super().__init__(f"{' '.join(argv)} exited {returncode}: {stderr.strip()}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


def trainer_path() -> str:
    """The ldpref-train binary (see the module docstring)."""
    env = os.environ.get("LDPREF_TRAIN")
    if env:
        return env
    root = checkout_root()
    if root is not None:
        p = root / os.environ.get("LDPREF_BUILD", "build") / "ldpref-train"
        if p.is_file():
            return str(p)
    found = shutil.which("ldpref-train")
    if found:
        return found
    for prefix in (os.environ.get("LDPREF_PREFIX"), "/usr/local"):
        if prefix and Path(prefix, "bin", "ldpref-train").is_file():
            return str(Path(prefix, "bin", "ldpref-train"))
    raise FileNotFoundError("ldpref-train not found; build it (make) or set LDPREF_TRAIN")


def _argv(command: str, options: Dict[str, Any]) -> List[str]:
    argv = [trainer_path(), command]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return argv


def run(command: str, **options: Any) -> str:
    """Runs ``ldpref-train COMMAND --option value ...`` and returns its
    standard output; TrainError when it exits non-zero."""
    argv = _argv(command, options)
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise TrainError(argv, p.returncode, p.stderr)
    return p.stdout


def fit(data: PathLike, out: PathLike, *, loss: Optional[str] = None, **options: Any) -> Dict:
    """Fits a model on a JSONL data file (an export, dense or text pairs,
    or an HF export's data file) and returns the model file written at out."""
    run("fit", data=data, out=out, loss=loss, quiet=True, **options)
    with open(out, encoding="utf-8") as f:
        return json.load(f)


def simulate(out: PathLike, theta_out: PathLike, **options: Any) -> Dict:
    """Synthetic Bradley-Terry labels (research): writes out and theta_out,
    returns theta* ({"theta": [...]})."""
    run("simulate", out=out, theta_out=theta_out, **options)
    with open(theta_out, encoding="utf-8") as f:
        return json.load(f)


def evaluate(
    model: PathLike,
    *,
    truth: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    **options: Any,
) -> Dict:
    """Evaluates a model against theta* (truth) or labelled data; the
    trainer's JSON summary."""
    return json.loads(run("evaluate", model=model, truth=truth, data=data, **options))


def score(model: PathLike, candidates: PathLike, **options: Any) -> List[Dict]:
    """Rewards and policy probabilities for each candidate set of a JSONL
    file; one dict per line of the trainer's output."""
    text = run("score", model=model, candidates=candidates, **options)
    return [json.loads(line) for line in text.splitlines() if line.strip()]
