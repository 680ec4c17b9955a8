"""The operator's and researcher's side through the Python binding, against
a real server: tokens and scopes, campaigns and views, export as an
iterator, retraining with a progress callback, models, activation,
scoring, schedule, corruption and its training view in the HF export, the
offline trainer; and the mapping of the library's errors."""

from __future__ import annotations

import json
import math
import sys

import pytest

import ldpref
from conftest import annotator, load_tasks, unique


@pytest.fixture(scope="module")
def labelled(server, admin, tmp_path_factory):
    """A campaign of 40 tasks answered by two annotators (20 each, "b" is
    always better), for training."""
    name = unique("learn")
    admin.create_campaign(name)
    load_tasks(admin, 40, name)
    d = tmp_path_factory.mktemp("learnkeys")
    for _ in range(2):
        with annotator(server, admin, d, name) as c:
            results = c.answer_batch((t, True) for t in c.next_tasks(20))
            assert all(r.error is None for r in results)
    return name


def test_error_names_are_the_librarys():
    names = {ldpref.error_name(code) for code in range(256)} - {"unknown_error"}
    assert {"already_answered", "budget_exceeded", "no_labels"} <= names
    for cls in ldpref.LdprefError.__subclasses__():
        assert cls.error_name in names, cls
        assert ldpref.error_class(cls.error_name) is cls
    assert ldpref.error_class("campaign_exists") is ldpref.LdprefError


def test_errors_carry_name_code_and_message(server, admin):
    with pytest.raises(ldpref.Unauthorized) as e:
        with ldpref.Admin(server.url, "op_not_a_token") as bad:
            bad.stats()
    assert (e.value.name, e.value.code) == ("unauthorized", 25) and isinstance(e.value, PermissionError)
    name = unique("dup")
    admin.create_campaign(name)
    with pytest.raises(ldpref.LdprefError) as e:
        admin.create_campaign(name)
    assert type(e.value) is ldpref.LdprefError and e.value.name == "campaign_exists"
    assert e.value.code == 33 and e.value.message
    with pytest.raises(ldpref.UnknownCampaign):
        admin.campaign(unique("nope"))
    with pytest.raises(ldpref.NetworkError) as e:
        with ldpref.Admin("http://127.0.0.1:9", "op_x", timeout=5) as far:
            far.stats()
    assert e.value.name == "network_error" and isinstance(e.value, ConnectionError)
    with pytest.raises(ldpref.InvalidArgument):
        admin.enrollment_tokens(0)
    with pytest.raises(ValueError):
        admin.export_to("/nonexistent/x.jsonl", view="sideways")


def test_tokens_and_scopes(server, admin):
    made = admin.create_token(unique("ci"), ["export"])
    assert made["token"].startswith("op_") and made["scopes"] == ["export"]
    with ldpref.Admin(server.url, made["token"]) as exporter:
        with pytest.raises(ldpref.InsufficientScope):
            exporter.stats()
        assert isinstance(list(exporter.export()), list)
    assert made["id"] in [t["id"] for t in admin.tokens()]
    assert admin.revoke_token(made["id"])["revoked_ms"] is not None
    with ldpref.Admin(server.url, made["token"]) as gone:
        with pytest.raises(ldpref.Unauthorized):
            list(gone.export())


def test_views_and_export(admin, labelled):
    view = admin.campaign(labelled)
    assert view["campaign"] == labelled and view["progress"]["labels"] == 40
    anns = admin.annotators(labelled)
    assert len(anns["annotators"]) == 2
    tasks = admin.tasks(labelled, limit=5)
    assert len(tasks["tasks"]) == 5
    one = admin.task(tasks["tasks"][0]["id"])
    assert one["campaign"] == labelled and len(one["responses"]) == 2 and one["labels"] == 1
    assert "annotators" in admin.quality(labelled)
    rows = admin.export(labelled)
    assert iter(rows) is rows  # a generator: lazily fetched
    rows = list(rows)
    assert len(rows) == 40 and all(r["campaign"] == labelled for r in rows)
    assert {"prompt", "chosen", "rejected", "epsilon", "z"} <= set(rows[0])
    conv = list(admin.export(labelled, format="conversational"))
    assert conv[0]["prompt"][-1]["role"] == "user"
    assert admin.stats()
    assert admin.audit(limit=5)["entries"]


def test_retrain_progress_models_score(server, admin, labelled):
    seen = []
    run = admin.retrain(campaign=labelled, progress=seen.append, poll_ms=20, l2=0.01)
    assert run["status"] == "succeeded"
    assert seen and seen[-1]["status"] == "succeeded" and all("status" in r for r in seen)
    version = run["model_version"]
    models = admin.models()
    assert models["active_version"] == version
    assert admin.model(version)["model"]["theta"]
    assert admin.activate(version)["version"] == version
    s = admin.score("Question x: which answer is kinder?", ["First answer x.", "Second answer x, longer.", "Hm."])
    np = pytest.importorskip("numpy")
    assert isinstance(s.probabilities, np.ndarray) and s.probabilities.shape == (3,)
    assert s.probabilities.sum() == pytest.approx(1.0, abs=1e-9)
    assert s.model_version == version and np.all(np.isfinite(s.rewards))
    assert len(admin.runs()) >= 1 and admin.run(run["run"])["curve"] is not None


def test_score_without_numpy_gives_lists(admin, labelled, monkeypatch):
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` now fails
    admin.retrain(campaign=labelled, l2=0.01)
    s = admin.score("Question y?", ["First answer y.", "Second answer y, longer."])
    assert isinstance(s.rewards, list) and isinstance(s.probabilities, list)
    assert len(s.probabilities) == 2 and math.isclose(sum(s.probabilities), 1.0, abs_tol=1e-9)
    with pytest.raises(ValueError):
        admin.score("Question y?", ["a", "b"], features=[[1.0]])


def test_retrain_errors_and_callback_exceptions(admin, labelled):
    empty = unique("nolabels")
    admin.create_campaign(empty)
    with pytest.raises(ldpref.NoLabels) as e:
        admin.retrain(campaign=empty, poll_ms=20)
    assert e.value.run["status"] == "failed"

    def boom(run):
        raise KeyError("from the callback")

    with pytest.raises(KeyError):
        admin.retrain(campaign=labelled, progress=boom, poll_ms=20)
    # The run went on and ended; the handle still works.
    assert admin.runs(1)[0]["status"] == "succeeded"


def test_schedule_and_corruption_view_in_hf(admin, labelled, tmp_path):
    sched = admin.set_schedule({"interval_s": 0, "every_labels": 0, "request": {"campaign": labelled}})
    assert admin.schedule()["request"]["campaign"] == labelled == sched["request"]["campaign"]
    settings = admin.set_corruption(0.3, "flip", seed=7, campaign=labelled)
    assert admin.corruption(labelled)["id"] == settings["id"]
    run = admin.retrain(campaign=labelled, poll_ms=20, l2=0.01)
    out = tmp_path / "corrupted"
    summary = admin.to_hf(out, view="corrupted")
    body = (out / "README.md").read_text()
    assert "training view of model version" in body and "| 0.3 | flip | 7 | none |" in body
    rows = [json.loads(l) for l in open(out / "data/all/train.jsonl")]
    assert len(rows) == summary["rows"] == 40
    flipped = sum(r["corrupted"] for r in rows)
    assert all(("z_received" in r and "flip_prob" in r) for r in rows)
    assert f"{flipped} of 40 rows were replaced" in body
    admin.set_corruption(0, "flip", campaign=labelled)
    assert run["status"] == "succeeded"


def test_offline_trainer(admin, labelled, tmp_path):
    data = tmp_path / "labels.jsonl"
    admin.export_to(data, labelled)
    model = ldpref.train.fit(data, tmp_path / "model.json", l2=0.01, folds=0)
    assert model["theta"] and model["loss"] == "square-chipo"
    report = ldpref.train.evaluate(tmp_path / "model.json", data=data)
    assert isinstance(report, dict) and report
    with pytest.raises(ldpref.train.TrainError) as e:
        ldpref.train.fit(data, tmp_path / "bad.json", loss="no-such-loss")
    assert e.value.returncode != 0 and "no-such-loss" in e.value.stderr
