"""The Hugging Face dataset export (Admin.to_hf, `ldpref admin export --hf`):
the card's YAML parses and names every config the way the datasets library
reads it, every config's file is JSONL with the documented columns and the
right flip_prob, the card states the user-level epsilon computed from the
rows, and, where the datasets library is importable, load_dataset reads the
directory without arguments."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

import ldpref
from conftest import annotator, cli, load_tasks, unique

STANDARD = {"prompt", "chosen", "rejected", "label_id", "task_id", "campaign", "annotator", "epsilon",
            "flip_prob", "z", "timestamp", "received_at"}


@pytest.fixture(scope="module")
def mixed(server, admin, tmp_path_factory):
    """A campaign with labels at epsilon 0.5 (3), 2 (2) and unprivatized (2),
    from three annotators."""
    name = unique("hf")
    admin.create_campaign(name, epsilon_min=0.1, epsilon_max=math.inf, allow_infinite=True,
                          epsilon_default=math.inf, epsilon_budget=1000)
    load_tasks(admin, 7, name)
    d = tmp_path_factory.mktemp("hfkeys")
    for cap, n in ((0.5, 3), (2.0, 2), (math.inf, 2)):
        total = math.inf if math.isinf(cap) else 100.0  # an unprivatized label spends inf
        with annotator(server, admin, d, name, max_epsilon_per_label=cap, max_epsilon_total=total) as c:
            for t in c.next_tasks(n):
                c.answer(t, True)
    return name


def shortest(v: float) -> str:
    """The card's number text: the fewest significant digits that read back as v."""
    return next(t for t in (f"{v:.{p}g}" for p in range(1, 18)) if float(t) == v)


def card(directory: Path):
    text = (directory / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(front), body


def check_configs_as_datasets_reads_them(meta):
    """The structure the datasets library requires of `configs`: a list of
    objects with config_name, data_files a list of {split, path}, at most
    one default."""
    assert isinstance(meta["configs"], list)
    defaults = [c["config_name"] for c in meta["configs"] if c.get("default")]
    assert defaults == ["all"]
    for c in meta["configs"]:
        assert isinstance(c["config_name"], str)
        for item in c["data_files"]:
            assert set(item) == {"split", "path"} and item["split"] == "train"


def rows_of(directory: Path, path: str):
    with open(directory / path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_to_hf_configs_columns_and_card(admin, mixed, tmp_path):
    out = tmp_path / "ds"
    summary = admin.to_hf(out, mixed, license="cc-by-4.0")
    meta, body = card(out)
    check_configs_as_datasets_reads_them(meta)
    assert meta["license"] == "cc-by-4.0" and meta["task_categories"] == ["text-generation"]
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["all", "epsilon-0.5", "epsilon-2", "unprivatized"]
    assert [c["name"] for c in summary["configs"]] == names

    everything = rows_of(out, "data/all/train.jsonl")
    assert len(everything) == summary["rows"] == 7
    per_config = {}
    for c in meta["configs"]:
        (item,) = c["data_files"]
        rows = rows_of(out, item["path"])
        per_config[c["config_name"]] = rows
        for r in rows:
            assert set(r) == STANDARD, set(r) ^ STANDARD
            if r["epsilon"] is None:
                assert r["flip_prob"] == 0
            else:
                assert r["flip_prob"] == pytest.approx(1 / (1 + math.exp(r["epsilon"])), rel=1e-15)
            assert isinstance(r["prompt"], str) and r["chosen"] != r["rejected"]
    assert {r["epsilon"] for r in per_config["epsilon-0.5"]} == {0.5}
    assert {r["epsilon"] for r in per_config["epsilon-2"]} == {2.0}
    assert {r["epsilon"] for r in per_config["unprivatized"]} == {None}
    assert [len(per_config[k]) for k in names[1:]] == [3, 2, 2]
    assert sorted(r["label_id"] for r in everything) == sorted(
        r["label_id"] for k in names[1:] for r in per_config[k])

    # The user-level epsilon: the largest sum of one annotator's epsilons.
    spent = defaultdict(float)
    unpriv = set()
    for r in everything:
        if r["epsilon"] is None:
            unpriv.add(r["annotator"])
        else:
            spent[r["annotator"]] += r["epsilon"]
    user_eps = max(spent.values())
    assert user_eps == 4.0 and summary["user_epsilon"] == user_eps
    assert summary["unprivatized_annotators"] == len(unpriv) == 1
    assert "user-level epsilon" in body and f"**{shortest(user_eps)}**" in body
    assert "NOT private" in body and "randomized response" in body
    assert f"label_smoothing={shortest(1 / (1 + math.exp(0.5)))}" in body
    assert "## Corruption" in body and "clean view" in body


def test_cli_hf_conversational(server, mixed, tmp_path):
    out = tmp_path / "conv"
    p = cli(server, "--token", server.token, "admin", "export", "--hf", str(out), "--campaign", mixed,
            "--format", "conversational")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows"] == 7
    meta, body = card(out)
    check_configs_as_datasets_reads_them(meta)
    assert meta["license"] == "unknown"
    for c in meta["configs"]:
        for r in rows_of(out, c["data_files"][0]["path"]):
            assert r["prompt"][-1]["role"] == "user"
            assert [t["role"] for t in r["chosen"]] == ["assistant"]
    assert "conversational" in body


def test_hf_refuses_a_non_empty_directory_and_empty_exports(admin, mixed, tmp_path):
    out = tmp_path / "busy"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ldpref.InvalidArgument) as e:
        admin.to_hf(out, mixed)
    assert e.value.name == "invalid_argument" and "not empty" in e.value.message
    assert [p.name for p in out.iterdir()] == ["keep.txt"]

    empty = unique("empty")
    admin.create_campaign(empty)
    with pytest.raises(ldpref.NoLabels):
        admin.to_hf(tmp_path / "none", empty)
    assert not (tmp_path / "none").exists()  # what the call made is removed
    with pytest.raises(ldpref.InvalidArgument):
        admin.to_hf(tmp_path / "x", mixed, license="MIT: yes")


def test_offline_trainer_reads_the_hf_files(admin, mixed, tmp_path):
    out = tmp_path / "fit"
    admin.to_hf(out, mixed)
    model = ldpref.train.fit(out / "data/all/train.jsonl", tmp_path / "m.json", l2=0.1, folds=0)
    assert len(model["theta"]) > 0 and model["data"]["n"] == 7
    # Each row's own epsilon reached the trainer (its c(epsilon) is per row).
    hist = {h["epsilon"]: h["count"] for h in model["data"]["epsilon_histogram"]}
    assert hist == {0.5: 3, 2.0: 2, None: 2}


def test_load_dataset_reads_the_directory(admin, mixed, tmp_path):
    datasets = pytest.importorskip(
        "datasets", reason="the Hugging Face datasets library is not installed (not in Debian)")
    out = tmp_path / "load"
    admin.to_hf(out, mixed)
    ds = datasets.load_dataset(str(out))
    assert ds["train"].num_rows == 7
    half = datasets.load_dataset(str(out), "epsilon-0.5", split="train")
    assert half.num_rows == 3 and set(half["epsilon"]) == {0.5}


def test_more_epsilon_values_than_open_files(server, admin, tmp_path):
    """70 epsilon values: more configs than the export keeps open at once
    (64), so the data files are written in two passes; each must still hold
    exactly its rows."""
    name = unique("many")
    admin.create_campaign(name, epsilon_min=0.01, epsilon_max=5)
    load_tasks(admin, 70, name)
    caps = [round(0.05 + 0.01 * i, 2) for i in range(70)]
    for cap in caps:
        with annotator(server, admin, tmp_path, name, max_epsilon_per_label=cap) as c:
            c.answer(c.next_tasks(1)[0], False)
    out = tmp_path / "many"
    summary = admin.to_hf(out, name)
    meta, _ = card(out)
    check_configs_as_datasets_reads_them(meta)
    assert len(meta["configs"]) == 71 and summary["rows"] == 70
    for c in meta["configs"][1:]:
        rows = rows_of(out, c["data_files"][0]["path"])
        assert len(rows) == 1 and c["config_name"] == f"epsilon-{rows[0]['epsilon']:g}"
    assert sorted(r["epsilon"] for r in rows_of(out, "data/all/train.jsonl")) == caps
