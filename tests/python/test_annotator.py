"""The annotator's side through the Python binding, against a real server:
keys, enrollment, tasks, answers (single and batch), the local budget,
progress; the same ledger shared with the ldpref CLI; and what leaves the
device, recorded on the wire."""

from __future__ import annotations

import json
import math

import pytest

import ldpref
from conftest import annotator, cli, load_tasks, unique
from relay import RecordingRelay, request_bodies


def test_keygen_writes_a_private_key_and_never_overwrites(tmp_path):
    key = tmp_path / "k.key"
    pub = ldpref.keygen(key)
    assert (tmp_path / "k.key.pub").read_text().strip() == pub
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ldpref.KeyFileError) as e:
        ldpref.keygen(key)
    assert e.value.name == "key_file" and e.value.code == 37
    with ldpref.Client("http://127.0.0.1:9", key) as c:
        assert c.public_key == pub


def test_annotator_flow(server, admin, tmp_path):
    name = unique("flow")
    admin.create_campaign(name, epsilon_min=0.1, epsilon_max=2, epsilon_default=1)
    ids = load_tasks(admin, 6, name)
    with annotator(server, admin, tmp_path, name) as c:
        assert c.budget().spent == 0
        tasks = c.next_tasks(3)
        assert len(tasks) == 3 and all(t.task_id in ids for t in tasks)
        assert all(isinstance(t, ldpref.Task) and t.campaign == name for t in tasks)
        assert all(t.a.startswith(("First", "Second")) for t in tasks)
        receipts = [
            c.answer(tasks[0], prefer_b=True),
            c.answer(tasks[1], False),
            c.answer(tasks[2].task_id, ldpref.TIE),
        ]
        for t, r in zip(tasks, receipts):
            assert r.task_id == t.task_id and r.z in (0, 1) and r.epsilon == 1.0
            assert r.label_id > 0 and not r.resent
        with pytest.raises(ldpref.AlreadyAnswered) as e:
            c.answer(tasks[0], False)
        assert (e.value.name, e.value.code) == ("already_answered", 60)
        b = c.budget()
        assert (b.spent, b.labels, b.pending) == (3.0, 3, 0)
        assert b.max_epsilon_per_label == 1.0 and b.max_epsilon_total == 100.0

        more = c.next_tasks(10)
        assert len(more) == 3
        results = c.answer_batch([(more[0], "a"), (more[1], "b"), (more[2], ldpref.TIE), (tasks[1], "a")])
        assert [r.error is None for r in results] == [True, True, True, False]
        assert isinstance(results[3].error, ldpref.AlreadyAnswered)
        assert all(r.receipt.epsilon == 1.0 for r in results[:3])
        assert c.budget().spent == 6.0

        p = c.progress()
        assert (p.campaign, p.tasks_total, p.annotator_labels, p.labels) == (name, 6, 6, 6)
        with pytest.raises(ldpref.CampaignComplete) as e:
            c.next_tasks(1)
        assert e.value.name == "campaign_complete"
    view = admin.campaign(name)
    assert json.dumps(view).count(name) >= 1
    labels = list(admin.export(name))
    assert len(labels) == 6 and {r["epsilon"] for r in labels} == {1.0}


def test_skip_and_quota(server, admin, tmp_path):
    name = unique("quota")
    admin.create_campaign(name, annotator_quota=1)
    load_tasks(admin, 3, name)
    with annotator(server, admin, tmp_path, name) as c:
        (t,) = c.next_tasks(1)
        c.skip(t)
        with pytest.raises(ldpref.NotAssigned):
            c.answer(t, True)
        assert c.budget().spent == 0  # a skip spends nothing
        (t2,) = c.next_tasks(1)
        c.answer(t2, True)
        with pytest.raises(ldpref.QuotaReached):
            c.next_tasks(1)


def test_local_budget_refuses_before_sending(server, admin, tmp_path):
    name = unique("cap")
    admin.create_campaign(name)
    load_tasks(admin, 2, name)
    with annotator(server, admin, tmp_path, name, max_epsilon_total=1.5) as c:
        a, b = c.next_tasks(2)
        c.answer(a, True)
        with pytest.raises(ldpref.LocalBudgetExceeded) as e:
            c.answer(b, True)
        assert e.value.name == "local_budget_exceeded"
        assert c.budget().spent == 1.0
    assert len(list(admin.export(name))) == 1  # nothing of b was sent


def test_true_label_never_reaches_the_wire(server, admin, tmp_path):
    """Every byte the client sends is recorded: each label message carries
    exactly the protocol's seven fields, and its z disagrees with the true
    answer ("b" for every task) at the randomized-response rate q(0.5):
    the count must lie within n*q +- 5.5 sd, which a client sending the
    true answer (0 disagreements) cannot meet."""
    name = unique("wire")
    n, eps = 200, 0.5
    admin.create_campaign(name)
    load_tasks(admin, n, name)
    relay = RecordingRelay(server.port)
    try:
        with annotator(server, admin, tmp_path, name, url=relay.url, max_epsilon_per_label=eps) as c:
            tasks = c.next_tasks(n)
            assert len(tasks) == n
            for t in tasks[: n // 2]:
                assert c.answer(t, prefer_b=True).epsilon == eps
            results = c.answer_batch((t, True) for t in tasks[n // 2 :])
            assert all(r.error is None for r in results)
        captured = relay.captured
    finally:
        relay.close()
    singles = request_bodies(captured, "/v1/labels")
    batches = request_bodies(captured, "/v1/labels/batch")
    labels = singles + [x for b in batches for x in b["labels"]]
    assert len(labels) == n
    fields = {"key", "task_id", "z", "epsilon", "nonce", "timestamp", "signature"}
    assert all(set(m) == fields and m["epsilon"] == eps for m in labels)
    disagree = sum(1 for m in labels if m["z"] != 1)
    q = 1 / (1 + math.exp(eps))
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    assert abs(disagree - mean) <= 5.5 * sd, (disagree, mean, sd)
    # No other request of the session carries an answer either.
    assert b'"choice"' not in captured and b'"prefer' not in captured


def test_python_and_cli_share_one_ledger_and_memo(server, admin, tmp_path):
    name = unique("shared")
    admin.create_campaign(name)
    tag = unique("s")
    load_tasks(admin, 2, name, tag=tag)
    c = annotator(server, admin, tmp_path, name)
    env = {"LDPREF_KEY": str(c.key_path)}
    with c:
        t1, t2 = sorted(c.next_tasks(2), key=lambda t: t.task_id)
        r1 = c.answer(t1, True)
        # The CLI on the same key and ledger: t1 is answered already.
        p = cli(server, "answer", str(t1.task_id), "b", env=env)
        assert p.returncode == 60, p.stderr
        # The CLI answers t2 (fetched by Python: the ledger remembers it).
        p = cli(server, "answer", str(t2.task_id), "a", env=env)
        assert p.returncode == 0, p.stderr
        with pytest.raises(ldpref.AlreadyAnswered):
            c.answer(t2, False)
        assert c.budget().spent == 2.0
        p = cli(server, "budget", env=env)
        assert p.returncode == 0 and "2" in p.stdout
        # The same comparison again under a new task id, with other spacing:
        # the CLI answers it from the memo Python wrote: same z, no new epsilon.
        admin.upload_tasks(
            [{"id": f"{tag}-again", "prompt": t1.prompt.replace(" ", "  "), "responses": [t1.a, t1.b]}],
            name,
        )
        p = cli(server, "next", "--count", "1", env=env)
        assert p.returncode == 0, p.stderr
        again = json.loads(p.stdout.splitlines()[0])
        answered = cli(server, "answer", str(again["task_id"]), "b" if again["a"] == t1.a else "a", env=env)
        assert answered.returncode == 0, answered.stderr
        assert c.budget().spent == 2.0
    rows = {r["task_id"]: r for r in admin.export(name)}
    # The memoized answer prefers the same response text in both tasks.
    assert rows[again["task_id"]]["chosen"] == rows[t1.task_id]["chosen"]
    assert rows[again["task_id"]]["epsilon"] == r1.epsilon


def test_arguments_checked_before_the_library(server, admin, tmp_path):
    name = unique("args")
    admin.create_campaign(name)
    load_tasks(admin, 1, name)
    with annotator(server, admin, tmp_path, name) as c:
        (t,) = c.next_tasks(1)
        for bad in ("maybe", 2, None):
            with pytest.raises(ValueError):
                c.answer(t, bad)
        with pytest.raises(ldpref.UnknownTask):
            c.answer(10**9, True)  # never fetched through this ledger
        assert c.budget().spent == 0
    with pytest.raises(ValueError):
        admin.enrollment_tokens(1, "bad\0name")
    closed = annotator(server, admin, tmp_path, name)
    closed.close()
    closed.close()  # idempotent
    with pytest.raises(ValueError):
        closed.budget()
