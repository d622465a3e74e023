"""The source tree keeps its shape: no import circle between files, and no file over 500 lines
of code (tests, comments and blank lines apart). scripts/code_shape.py measures both; these
tests run it on the tree and, to show it can fail, on a small tree made to break each rule."""

import subprocess
import sys

from infra_paths import REPO

SCRIPT = REPO / "scripts" / "code_shape.py"


def shape(root, limit=500):
    return subprocess.run([sys.executable, str(SCRIPT), "--check", str(limit), "--root", str(root)],
                          capture_output=True, text=True)


def test_the_tree_has_no_circle_and_no_oversized_file():
    r = shape(REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no import circles" in r.stdout


def test_a_circle_and_an_oversized_file_are_reported(tmp_path):
    src = tmp_path / "src"
    (src / "core").mkdir(parents=True)
    (src / "core" / "lib.rs").write_text("pub mod x;\n")
    (src / "core" / "x.rs").write_text("pub fn x() {}\n")
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\n")
    (src / "a.rs").write_text("use crate::b::g;\npub fn f() { g() }\n")
    (src / "b.rs").write_text("use crate::a::f;\npub fn g() {}\n" + "fn h() {}\n" * 30)
    r = shape(tmp_path, limit=20)
    assert r.returncode == 1
    assert "circle: a <-> b" in r.stdout, r.stdout
    assert "over 20 lines of code: src/b.rs (32)" in r.stdout, r.stdout


def test_a_circle_through_a_folders_reexport_is_reported(tmp_path):
    # y imports X as `super::X`, which the folder's mod.rs only re-exports from x; x imports y.
    src = tmp_path / "src"
    (src / "core").mkdir(parents=True)
    (src / "core" / "lib.rs").write_text("")
    (src / "f").mkdir()
    (src / "lib.rs").write_text("pub mod f;\n")
    (src / "f" / "mod.rs").write_text("mod x;\nmod y;\npub use x::X;\npub struct Own;\n")
    (src / "f" / "x.rs").write_text("use super::y::g;\npub struct X;\n")
    (src / "f" / "y.rs").write_text("use super::{Own, X};\npub fn g() {}\n")
    r = shape(tmp_path)
    assert "circle: f::x <-> f::y" in r.stdout, r.stdout
    # Naming the folder's own item is no import of a child.
    (src / "f" / "x.rs").write_text("pub struct X;\n")
    assert "no import circles" in shape(tmp_path).stdout


def test_an_oversized_test_file_is_reported(tmp_path):
    # A test-only file is no module of the graph, but one reason to change holds for it too.
    src = tmp_path / "src"
    (src / "core").mkdir(parents=True)
    (src / "core" / "lib.rs").write_text("")
    (src / "lib.rs").write_text("")
    (src / "x_tests.rs").write_text("fn row() {}\n" * 30)
    r = shape(tmp_path, limit=20)
    assert r.returncode == 1 and "over 20 lines of code: src/x_tests.rs (30)" in r.stdout, r.stdout
