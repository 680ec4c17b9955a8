"""Annotator and operator handles over libldpref.

Every call goes through the C library: randomized response, the memo, the
local epsilon ledger, signing and the wire protocol all stay in C. A handle
is not thread-safe (use one per thread), as in C.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

from ._lib import CHOICE_A, CHOICE_B, CHOICE_CANT_TELL, KEY_B64_SIZE, ffi, lib
from .errors import LdprefError, make_error

PathLike = Union[str, "os.PathLike[str]"]
Json = Dict[str, Any]

#: The "can't tell" answer (sent as a fair coin; spends epsilon like any).
TIE = "tie"

Choice = Union[bool, str]
_H = TypeVar("_H", bound="_Handle")


def _text(s: Optional[Union[str, "os.PathLike[str]"]], keep: list) -> Any:
    """A borrowed C string for s (None: NULL); keep holds it alive."""
    if s is None:
        return ffi.NULL
    data = os.fsencode(s) if not isinstance(s, str) else s.encode()
    if b"\0" in data:
        raise ValueError("a string passed to libldpref cannot hold a NUL character")
    buf = ffi.new("char[]", data)
    keep.append(buf)
    return buf


def _str(p: Any) -> str:
    return ffi.string(p).decode() if p != ffi.NULL else ""


def _choice(choice: Choice) -> int:
    """The library's code for a TRUE answer: True or "b" (b is better),
    False or "a", TIE ("tie", "t"): can't tell."""
    if choice is True or choice in ("b", "B"):
        return CHOICE_B
    if choice is False or choice in ("a", "A"):
        return CHOICE_A
    if choice in (TIE, "t", "cant_tell"):
        return CHOICE_CANT_TELL
    raise ValueError(f"a choice is True/'b', False/'a' or ldpref.TIE, not {choice!r}")


def keygen(key_path: PathLike) -> str:
    """Creates an Ed25519 key pair: the secret key at key_path (mode 0600,
    never overwriting a file) and the public key at key_path + ".pub".
    Returns the public key (base64url)."""
    keep: list = []
    pub = ffi.new(f"char[{KEY_B64_SIZE}]")
    rc = lib.ldpref_keygen(_text(os.fspath(key_path), keep), pub)
    if rc != 0:
        raise make_error(rc, f"keygen {os.fspath(key_path)}")
    return _str(pub)


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a task's conversation."""

    role: str
    content: str


@dataclass(frozen=True)
class Task:
    """A comparison as presented to this annotator (a/b in presentation order)."""

    task_id: int
    campaign: str
    prompt: str
    a: str
    b: str
    epsilon_proposed: float  #: math.inf: the campaign proposes no privatization
    epsilon_min: float
    epsilon_max: float
    context: Tuple[Turn, ...] = ()


@dataclass(frozen=True)
class Receipt:
    """The server's acknowledgement of a label. z is the privatized answer
    as sent (1: b reported preferred), never the true one."""

    label_id: int
    task_id: int
    z: int
    epsilon: float  #: math.inf for an unprivatized label
    received_at: int  #: server time, Unix ms
    resent: bool
    simulated: bool


@dataclass(frozen=True)
class BatchResult:
    """One item of answer_batch: a receipt, or the item's error."""

    task_id: int
    receipt: Optional[Receipt]
    error: Optional[LdprefError]


@dataclass(frozen=True)
class Enrollment:
    annotator_id: int
    pseudonym: str
    campaign: str
    epsilon_budget: float


@dataclass(frozen=True)
class Budget:
    """Local privacy accounting from the ledger."""

    spent: float
    max_epsilon_total: float
    max_epsilon_per_label: float
    labels: int  #: distinct comparisons answered (memo entries)
    pending: int  #: signed labels without a receipt yet
    simulated: int


@dataclass(frozen=True)
class Progress:
    campaign: str
    tasks_total: int
    tasks_complete: int
    labels: int
    labels_needed: int
    annotator_labels: int
    annotator_quota: int


@dataclass(frozen=True)
class Scores:
    """A score answer: rewards (NaN for a general-preference model) and the
    policy's probabilities, in candidate order; NumPy arrays when NumPy is
    importable, else lists. response is the server's whole answer."""

    rewards: Any
    probabilities: Any
    model_version: int
    response: Json = field(repr=False)


def _receipt(r: Any) -> Receipt:
    return Receipt(
        int(r.label_id),
        int(r.task_id),
        int(r.z),
        float(r.epsilon),
        int(r.received_at),
        bool(r.resent),
        bool(r.simulated),
    )


def _vector(values: List[float]) -> Any:
    try:
        import numpy
    except ImportError:
        return values
    return numpy.asarray(values, dtype=float)


class _Handle:
    """An open libldpref handle; closed by close() or a with block."""

    def __init__(
        self,
        server: str,
        key_path: Optional[PathLike],
        *,
        operator_token: Optional[str] = None,
        ledger_path: Optional[PathLike] = None,
        max_epsilon_per_label: Optional[float] = None,
        max_epsilon_total: Optional[float] = None,
        timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        ca_file: Optional[PathLike] = None,
        max_task_bytes: Optional[int] = None,
        simulate_ctl_alpha: float = 0.0,
        simulate_ctl_strategy: Optional[str] = None,
        simulate_ctl_seed: int = 0,
    ) -> None:
        self._c = ffi.NULL
        keep: list = []
        o = ffi.new("ldpref_options *")
        lib.ldpref_options_init(o)
        o.server_url = _text(server, keep)
        o.key_path = _text(None if key_path is None else os.fspath(key_path), keep)
        o.ledger_path = _text(None if ledger_path is None else os.fspath(ledger_path), keep)
        o.operator_token = _text(operator_token, keep)
        o.ca_file = _text(None if ca_file is None else os.fspath(ca_file), keep)
        if max_epsilon_per_label is not None:
            o.max_epsilon_per_label = max_epsilon_per_label
        if max_epsilon_total is not None:
            o.max_epsilon_total = max_epsilon_total
        if timeout is not None:
            o.timeout_ms = int(timeout * 1000)
        if connect_timeout is not None:
            o.connect_timeout_ms = int(connect_timeout * 1000)
        o.simulate_ctl_alpha = simulate_ctl_alpha
        o.simulate_ctl_strategy = _text(simulate_ctl_strategy, keep)
        o.simulate_ctl_seed = simulate_ctl_seed
        out = ffi.new("ldpref_client **")
        rc = lib.ldpref_client_open(o, out)
        if rc != 0:
            raise make_error(rc)
        self._c = out[0]
        if max_task_bytes is not None:
            self._check(lib.ldpref_set_max_task_bytes(self._c, max_task_bytes))

    # -- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Closes the handle and wipes its secrets. Idempotent."""
        if self._c != ffi.NULL:
            lib.ldpref_client_close(self._c)
            self._c = ffi.NULL

    def __enter__(self: "_H") -> "_H":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 — interpreter shutdown may have torn down the module
            pass

    # -- helpers ----------------------------------------------------------

    def _handle(self) -> Any:
        if self._c == ffi.NULL:
            raise ValueError("the handle is closed")
        return self._c

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise make_error(rc, _str(lib.ldpref_errmsg(self._c)))

    def _json(self, fn: Callable[..., int], *args: Any) -> Any:
        """Calls fn(handle, *args, &json_out) and returns the parsed JSON."""
        out = ffi.new("char **")
        rc = fn(self._handle(), *args, out)
        try:
            self._check(rc)
            return json.loads(_str(out[0])) if out[0] != ffi.NULL else None
        finally:
            lib.ldpref_free(out[0])

    # -- scoring (score scope, or anonymous on a --public-score server) ---

    def score(
        self,
        prompt: str,
        candidates: Sequence[str],
        features: Optional[Sequence[Sequence[float]]] = None,
        *,
        version: Optional[int] = None,
        ref_logprobs: Optional[Sequence[float]] = None,
    ) -> Scores:
        """Scores candidate responses to prompt with the served model (or
        version). features: one vector per candidate for a dense model."""
        if features is not None and len(features) != len(candidates):
            raise ValueError("features needs one vector per candidate")
        if ref_logprobs is not None and len(ref_logprobs) != len(candidates):
            raise ValueError("ref_logprobs needs one number per candidate")
        cands = []
        for i, text in enumerate(candidates):
            c: Json = {"text": text}
            if features is not None:
                c["features"] = [float(x) for x in features[i]]
            if ref_logprobs is not None:
                c["ref_logprob"] = float(ref_logprobs[i])
            cands.append(c)
        req: Json = {"prompt": prompt, "candidates": cands}
        if version is not None:
            req["version"] = version
        keep: list = []
        text = json.dumps(req, allow_nan=False)
        resp = self._json(lib.ldpref_score, _text(text, keep))
        got = resp["candidates"]
        rewards = [math.nan if c.get("reward") is None else float(c["reward"]) for c in got]
        probs = [float(c["probability"]) for c in got]
        return Scores(_vector(rewards), _vector(probs), int(resp["model_version"]), resp)


class Client(_Handle):
    """An annotator's device: key, ledger (memo, epsilon spent, outbox).

    ``Client(server, key_path)`` opens the key made by :func:`keygen`; the
    ledger defaults to ``key_path + ".ledger"``, the same file the ``ldpref``
    CLI uses with ``--key key_path``, so both share one memo and budget.
    max_epsilon_per_label (default 1) and max_epsilon_total (default 100)
    are the annotator's own caps."""

    def __init__(self, server: str, key_path: PathLike, **options: Any) -> None:
        super().__init__(server, key_path, **options)
        #: the secret key file (the ledger is key_path + ".ledger" by default)
        self.key_path = os.fspath(key_path)

    @property
    def public_key(self) -> str:
        """This device's public key (base64url)."""
        buf = ffi.new(f"char[{KEY_B64_SIZE}]")
        self._check(lib.ldpref_public_key(self._handle(), buf))
        return _str(buf)

    def enroll(self, token: str) -> Enrollment:
        """Enrolls the key with a one-time token from an operator."""
        keep: list = []
        e = ffi.new("ldpref_enrollment *")
        self._check(lib.ldpref_enroll(self._handle(), _text(token, keep), e))
        return Enrollment(
            int(e.annotator_id), _str(e.pseudonym), _str(e.campaign), float(e.epsilon_budget)
        )

    def next_tasks(self, count: int = 1) -> List[Task]:
        """Fetches up to count (1..1000) tasks, leased to this annotator.
        Raises NoTask, CampaignComplete or QuotaReached when there is none."""
        tasks = ffi.new("ldpref_task **")
        n = ffi.new("size_t *")
        self._check(lib.ldpref_next_tasks(self._handle(), count, tasks, n))
        try:
            out = []
            for i in range(n[0]):
                t = tasks[0][i]
                ctx = tuple(
                    Turn(_str(t.context[k].role), _str(t.context[k].content))
                    for k in range(t.n_context)
                )
                out.append(
                    Task(
                        int(t.task_id),
                        _str(t.campaign),
                        _str(t.prompt),
                        _str(t.a),
                        _str(t.b),
                        float(t.epsilon_proposed),
                        float(t.epsilon_min),
                        float(t.epsilon_max),
                        ctx,
                    )
                )
            return out
        finally:
            lib.ldpref_tasks_free(tasks[0], n[0])

    def answer(self, task: Union[Task, int], prefer_b: Choice) -> Receipt:
        """Answers a fetched task with the annotator's TRUE choice: True or
        "b" (b is better), False or "a", or TIE (can't tell). Only a
        randomized answer leaves the device; a task answered before raises
        AlreadyAnswered (nothing new is drawn)."""
        tid = task.task_id if isinstance(task, Task) else int(task)
        r = ffi.new("ldpref_receipt *")
        self._check(lib.ldpref_answer_id(self._handle(), tid, _choice(prefer_b), r))
        return _receipt(r)

    def answer_batch(self, answers: Iterable[Tuple[Union[Task, int], Choice]]) -> List[BatchResult]:
        """Answers many (task, choice) pairs through the batch endpoint.
        Each item gets its receipt or its own error; a whole-call failure
        (e.g. NetworkError) raises."""
        pairs = list(answers)
        if not pairs:
            return []
        items = ffi.new("ldpref_batch_item[]", len(pairs))
        for i, (task, choice) in enumerate(pairs):
            items[i].task = ffi.NULL
            items[i].task_id = task.task_id if isinstance(task, Task) else int(task)
            items[i].choice = _choice(choice)
        self._check(lib.ldpref_answer_batch(self._handle(), items, len(pairs)))
        out = []
        for i in range(len(pairs)):
            it = items[i]
            err = None if it.error == 0 else make_error(it.error, _str(it.message))
            rec = _receipt(it.receipt) if it.error == 0 or it.receipt.label_id > 0 else None
            out.append(BatchResult(int(it.task_id), rec, err))
        return out

    def skip(self, task: Union[Task, int]) -> None:
        """Skips a fetched task: nothing is sent but that it was skipped."""
        tid = task.task_id if isinstance(task, Task) else int(task)
        self._check(lib.ldpref_skip(self._handle(), tid))

    def resend_pending(self) -> Tuple[int, int]:
        """Resends signed labels without a receipt: (sent now, still pending)."""
        sent, pending = ffi.new("size_t *"), ffi.new("size_t *")
        self._check(lib.ldpref_resend_pending(self._handle(), sent, pending))
        return int(sent[0]), int(pending[0])

    def progress(self) -> Progress:
        """Where this annotator's campaign stands."""
        p = ffi.new("ldpref_progress *")
        self._check(lib.ldpref_progress_get(self._handle(), p))
        return Progress(
            _str(p.campaign),
            int(p.tasks_total),
            int(p.tasks_complete),
            int(p.labels),
            int(p.labels_needed),
            int(p.annotator_labels),
            int(p.annotator_quota),
        )

    def budget(self) -> Budget:
        """The local epsilon ledger: spent, caps, labels, pending."""
        b = ffi.new("ldpref_budget *")
        self._check(lib.ldpref_budget_get(self._handle(), b))
        return Budget(
            float(b.spent),
            float(b.max_epsilon_total),
            float(b.max_epsilon_per_label),
            int(b.labels),
            int(b.pending),
            int(b.simulated),
        )


class Admin(_Handle):
    """An operator's handle: ``Admin(server, token)`` with an operator token
    (its scopes decide which calls succeed)."""

    def __init__(self, server: str, token: str, **options: Any) -> None:
        super().__init__(server, None, operator_token=token, **options)

    # -- tasks, enrollment, campaigns, views --------------------------------

    def upload_tasks(
        self, tasks: Union[PathLike, Iterable[Json]], campaign: Optional[str] = None
    ) -> Json:
        """Uploads tasks (a JSONL file, or task objects such as
        ``{"id", "prompt", "responses": [a, b]}``; docs/protocol.md) to
        campaign. Returns {"loaded", "task_ids", "skipped_duplicates"}."""
        keep: list = []
        if isinstance(tasks, (str, os.PathLike)):
            return self._json(
                lib.ldpref_admin_tasks_load, _text(os.fspath(tasks), keep), _text(campaign, keep)
            )
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
            for t in tasks:
                f.write(json.dumps(t) + "\n")
            f.flush()
            return self._json(
                lib.ldpref_admin_tasks_load, _text(f.name, keep), _text(campaign, keep)
            )

    def enrollment_tokens(self, count: int = 1, campaign: Optional[str] = None) -> List[str]:
        """count one-time enrollment tokens for campaign (default "default")."""
        keep: list = []
        out = self._json(lib.ldpref_admin_enrollment_tokens, _text(campaign, keep), count)
        return list(out["tokens"])

    def create_campaign(
        self,
        name: str,
        *,
        epsilon_min: Optional[float] = None,
        epsilon_max: Optional[float] = None,
        allow_infinite: Optional[bool] = None,
        epsilon_budget: Optional[float] = None,
        epsilon_default: Optional[float] = None,
        labels_per_task: Optional[int] = None,
        annotator_quota: Optional[int] = None,
    ) -> Json:
        """Creates a campaign; unset fields keep the library's defaults."""
        keep: list = []
        spec = ffi.new("ldpref_campaign *")
        lib.ldpref_campaign_init(spec)
        spec.name = _text(name, keep)
        for attr, value in (
            ("epsilon_min", epsilon_min),
            ("epsilon_max", epsilon_max),
            ("epsilon_budget", epsilon_budget),
            ("epsilon_default", epsilon_default),
            ("labels_per_task", labels_per_task),
            ("annotator_quota", annotator_quota),
        ):
            if value is not None:
                setattr(spec, attr, value)
        if allow_infinite is not None:
            spec.allow_infinite = int(bool(allow_infinite))
        return self._json(lib.ldpref_admin_campaign_create, spec)

    def campaign(self, name: Optional[str] = None, bucket_s: int = 0) -> Json:
        """A campaign's progress, labels over time and epsilon histogram."""
        keep: list = []
        return self._json(lib.ldpref_admin_campaign, _text(name, keep), bucket_s)

    def annotators(self, campaign: Optional[str] = None, offset: int = 0, limit: int = 0) -> Json:
        """A page of the campaign's annotators."""
        keep: list = []
        return self._json(lib.ldpref_admin_annotators, _text(campaign, keep), offset, limit)

    def tasks(self, campaign: Optional[str] = None, offset: int = 0, limit: int = 0) -> Json:
        """A page of the campaign's tasks with their label counts."""
        keep: list = []
        return self._json(lib.ldpref_admin_tasks, _text(campaign, keep), offset, limit)

    def task(self, task_id: int) -> Json:
        """One task in full."""
        return self._json(lib.ldpref_admin_task, task_id)

    def revoke(self, key_or_pseudonym: str) -> None:
        """Revokes an annotator by public key or pseudonym ("ann-...")."""
        keep: list = []
        self._check(lib.ldpref_admin_revoke(self._handle(), _text(key_or_pseudonym, keep)))

    def stats(self) -> Json:
        """Server statistics."""
        return self._json(lib.ldpref_admin_stats)

    def quality(self, campaign: Optional[str] = None) -> Json:
        """Debiased label quality of a campaign."""
        keep: list = []
        return self._json(lib.ldpref_admin_quality, _text(campaign, keep))

    def audit(self, after_id: int = 0, limit: int = 0) -> Json:
        """A page of the audit log."""
        return self._json(lib.ldpref_admin_audit, after_id, limit)

    # -- operator tokens ------------------------------------------------------

    def create_token(self, name: str, scopes: Union[str, Iterable[str]]) -> Json:
        """A new operator token; its secret ("token") is in this answer only."""
        keep: list = []
        s = scopes if isinstance(scopes, str) else ",".join(scopes)
        return self._json(lib.ldpref_admin_token_create, _text(name, keep), _text(s, keep))

    def tokens(self) -> List[Json]:
        """Every operator token, live and revoked, without secrets."""
        return list(self._json(lib.ldpref_admin_tokens)["tokens"])

    def revoke_token(self, token_id: str) -> Json:
        keep: list = []
        return self._json(lib.ldpref_admin_token_revoke, _text(token_id, keep))

    def rotate_token(self, token_id: str) -> Json:
        keep: list = []
        return self._json(lib.ldpref_admin_token_rotate, _text(token_id, keep))

    # -- export -----------------------------------------------------------

    def export(
        self,
        campaign: Optional[str] = None,
        *,
        view: Optional[str] = None,
        version: int = 0,
        format: Optional[str] = None,
    ) -> Iterator[Json]:
        """The labels as dicts, one per exported line (TRL's standard format,
        or format="conversational"; view="corrupted": a model's training
        view). The export streams to a private temporary file first; it is
        fetched when iteration starts."""
        with tempfile.TemporaryDirectory(prefix="ldpref-export-") as d:
            path = os.path.join(d, "export.jsonl")
            self.export_to(path, campaign, view=view, version=version, format=format)
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        yield json.loads(line)

    def export_to(
        self,
        path: PathLike,
        campaign: Optional[str] = None,
        *,
        view: Optional[str] = None,
        version: int = 0,
        format: Optional[str] = None,
    ) -> None:
        """The export as a JSONL file at path (created mode 0600)."""
        keep: list = []
        self._check(
            lib.ldpref_admin_export_format_path(
                self._handle(),
                _text(campaign, keep),
                _text(view, keep),
                version,
                _text(format, keep),
                _text(os.fspath(path), keep),
            )
        )

    def to_hf(
        self,
        directory: PathLike,
        campaign: Optional[str] = None,
        *,
        view: Optional[str] = None,
        version: int = 0,
        format: Optional[str] = None,
        license: Optional[str] = None,
        pretty_name: Optional[str] = None,
    ) -> Json:
        """Writes a Hugging Face dataset directory (new or empty) that
        ``datasets.load_dataset(directory)`` reads: a config per epsilon, an
        "all" config, and a dataset card with the privacy model. Returns the
        summary {"rows", "annotators", "user_epsilon", "configs", ...}."""
        keep: list = []
        o = ffi.new("ldpref_hf_options *")
        lib.ldpref_hf_options_init(o)
        o.campaign = _text(campaign, keep)
        o.view = _text(view, keep)
        o.version = version
        o.format = _text(format, keep)
        o.license = _text(license, keep)
        o.pretty_name = _text(pretty_name, keep)
        return self._json(lib.ldpref_admin_export_hf, _text(os.fspath(directory), keep), o)

    # -- learning ---------------------------------------------------------

    def retrain(
        self,
        request: Optional[Json] = None,
        *,
        wait: bool = True,
        progress: Optional[Callable[[Json], None]] = None,
        poll_ms: int = 0,
        **fields: Any,
    ) -> Json:
        """Starts a training run (request fields of POST /v1/retrain: loss,
        campaign, beta, ...; keyword arguments add to request). With wait
        (default) polls until the run ends, calling progress(run) with every
        run object polled, and returns the final run; a run that failed
        raises its error (e.g. NoLabels) with the run in ``.run``."""
        req = dict(request or {})
        req.update(fields)
        keep: list = []
        text = json.dumps(req, allow_nan=False)
        run = self._json(lib.ldpref_admin_retrain, _text(text, keep))
        if not wait:
            return run
        return self.wait_run(int(run["run"]), progress=progress, poll_ms=poll_ms)

    def wait_run(
        self,
        run_id: int,
        *,
        progress: Optional[Callable[[Json], None]] = None,
        poll_ms: int = 0,
    ) -> Json:
        """Polls a run until it ends (see retrain), in C: an exception
        raised by progress (KeyboardInterrupt too) is re-raised once the run
        has ended. To stop waiting early, start with wait=False and poll
        run(id) yourself, or cancel_run(id)."""
        raised: List[BaseException] = []

        def on_progress(ctx: Any, run_json: Any) -> None:
            if progress is None or raised:
                return
            try:
                progress(json.loads(_str(run_json)))
            except BaseException as e:  # noqa: BLE001 — re-raised below
                raised.append(e)

        # The callback object must live until the C call returns.
        callback = ffi.callback("void(void *, const char *)", on_progress)
        out = ffi.new("char **")
        rc = lib.ldpref_admin_run_wait(self._handle(), run_id, poll_ms, callback, ffi.NULL, out)
        try:
            final = json.loads(_str(out[0])) if out[0] != ffi.NULL else None
            if raised:
                raise raised[0]
            if rc != 0:
                err = make_error(rc, _str(lib.ldpref_errmsg(self._c)))
                err.run = final  # type: ignore[attr-defined]
                raise err
            return final
        finally:
            lib.ldpref_free(out[0])
            del callback

    def run(self, run_id: int) -> Json:
        """One run with its training curve."""
        return self._json(lib.ldpref_admin_run_get, run_id)

    def runs(self, limit: int = 0) -> List[Json]:
        """The newest runs."""
        return list(self._json(lib.ldpref_admin_runs, limit)["runs"])

    def cancel_run(self, run_id: int) -> Json:
        return self._json(lib.ldpref_admin_run_cancel, run_id)

    def models(self) -> Json:
        """{"models": [...], "active_version": v or None}, newest first."""
        return self._json(lib.ldpref_admin_models)

    def model(self, version: int = 0) -> Json:
        """One model with its model file and curve (0: the active one)."""
        return self._json(lib.ldpref_admin_model_get, version)

    def activate(self, version: int) -> Json:
        """Serves model version from now on."""
        return self._json(lib.ldpref_admin_model_activate, version)

    def schedule(self) -> Json:
        """The periodic retraining schedule."""
        return self._json(lib.ldpref_admin_schedule_get)

    def set_schedule(self, schedule: Json) -> Json:
        """Stores a schedule {"interval_s", "every_labels", "request"}."""
        keep: list = []
        text = json.dumps(schedule, allow_nan=False)
        return self._json(lib.ldpref_admin_schedule_set, _text(text, keep))

    def corruption(self, campaign: Optional[str] = None) -> Json:
        """The server-side corruption settings in force for campaign."""
        keep: list = []
        return self._json(lib.ldpref_admin_corruption_get, _text(campaign, keep))

    def set_corruption(
        self,
        alpha: float,
        strategy: str = "flip",
        *,
        seed: int = 0,
        feature: Optional[int] = None,
        campaign: Optional[str] = None,
    ) -> Json:
        """Stores new corruption settings (experiments: LTC on privatized labels)."""
        keep: list = []
        spec = ffi.new("ldpref_corruption *")
        lib.ldpref_corruption_init(spec)
        spec.campaign = _text(campaign, keep)
        spec.alpha = alpha
        spec.strategy = _text(strategy, keep)
        spec.seed = seed
        spec.feature = -1 if feature is None else feature
        return self._json(lib.ldpref_admin_corruption_set, spec)
