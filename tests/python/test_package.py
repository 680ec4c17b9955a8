"""The package as users get it: installed with pip from this checkout (it
then finds this checkout's libldpref.so), the library chosen by
LDPREF_LIBRARY, and the examples of docs/python.md run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, Server

PYTHON = sys.executable


def run_python(code: str, env_extra: dict, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LDPREF_")}
    env.update(env_extra)
    return subprocess.run([PYTHON, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package installed with pip (offline) into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    p = subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", "--no-deps",
         "--target", str(target), str(ROOT / "client" / "python")],
        capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    return target


SHOW = "import ldpref; print(ldpref.__file__); print(ldpref.library_path); print(ldpref.library_version())"


def test_pip_install_finds_the_checkouts_library(installed, tmp_path):
    env = {"PYTHONPATH": str(installed), "LDPREF_BUILD": os.environ.get("LDPREF_BUILD", "build")}
    p = run_python(SHOW, env, tmp_path)
    assert p.returncode == 0, p.stderr
    where, lib, version = p.stdout.split()
    assert where.startswith(str(installed))  # the installed copy, not the source tree
    assert os.path.samefile(lib, BUILD / "libldpref.so")
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)


def test_an_install_prefix_is_found_without_a_checkout(installed, tmp_path):
    """A copy of the package that knows no checkout finds the library under
    LDPREF_PREFIX/lib, laid out as `make install` lays it out."""
    alone = tmp_path / "site"
    shutil.copytree(installed, alone)
    (alone / "ldpref" / "_checkout.py").unlink()
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    shutil.copy(BUILD / "libldpref.so", prefix / "lib" / "libldpref.so.0")
    p = run_python(SHOW, {"PYTHONPATH": str(alone), "LDPREF_PREFIX": str(prefix)}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[1] == str(prefix / "lib" / "libldpref.so.0")


def test_ldpref_library_chooses_the_library(tmp_path):
    src = {"PYTHONPATH": str(ROOT / "client" / "python")}
    p = run_python("import ldpref", {**src, "LDPREF_LIBRARY": str(tmp_path / "missing.so")}, tmp_path)
    assert p.returncode != 0 and "ImportError" in p.stderr and "missing.so" in p.stderr
    p = run_python("import ldpref; print(ldpref.library_path)",
                   {**src, "LDPREF_LIBRARY": str(BUILD / "libldpref.so")}, tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == str(BUILD / "libldpref.so")


def doc_examples() -> str:
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    return "\n".join(blocks)


def test_docs_examples_run(tmp_path):
    code = doc_examples()
    (tmp_path / "server").mkdir()
    s = Server(tmp_path / "server")
    try:
        work = tmp_path / "work"
        work.mkdir()
        env = {"PYTHONPATH": str(ROOT / "client" / "python"), "LDPREF_SERVER": s.url,
               "LDPREF_OPERATOR_TOKEN": s.token, "LDPREF_BUILD": os.environ.get("LDPREF_BUILD", "build")}
        p = run_python(code, env, work)
    finally:
        s.stop()
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "already_answered 60" in out
    assert "succeeded 1" in out and "square-chipo 30" in out
    assert "['all', 'epsilon-1']" in out and "\n15.0\n" in out
    assert (work / "tour-dataset" / "README.md").is_file()


def _normalized_c(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)  # preprocessor lines
    text = text.replace("LDPREF_WUR", "").replace("LDPREF_KEY_B64_SIZE", "48")
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s*([(){};,*\[\]])\s*", r"\1", text)


def test_the_bindings_declarations_are_the_headers():
    """The cffi declarations are a copy of client/lib/ldpref.h (ABI mode
    needs them): every struct has the header's fields in the header's
    order and every function the header's prototype, so a header change
    that the copy misses fails here instead of corrupting memory."""
    from ldpref._lib import CDEF

    header = _normalized_c((ROOT / "client" / "lib" / "ldpref.h").read_text())
    cdef = _normalized_c(CDEF)
    structs = re.findall(r"typedef struct (\w+)\{(.*?)\}\1;", cdef)
    assert len(structs) >= 10
    for name, body in structs:
        m = re.search(r"typedef struct %s\{(.*?)\}%s;" % (name, name), header)
        assert m and m.group(1) == body, name
    functions = re.findall(r"[^;{}]*?\b(ldpref_\w+)\([^;]*?\);", cdef)
    assert len(functions) >= 50
    for decl in re.findall(r"[^;{}]*?\bldpref_\w+\([^;]*?\);", cdef):
        assert decl.strip() in header, decl
