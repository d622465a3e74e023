"""The artifact `sam build` made (infra/sam-build.sh runs this after it; needs .aws-sam/build):
every function of the built template points at a `bootstrap` that is an ELF for aarch64
(e_machine 183, EM_AARCH64), 64-bit little-endian, and newer than every source it is built from.
"""

import pathlib
import struct

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / ".aws-sam/build"
EM_AARCH64, EM_X86_64 = 183, 62


def elf_machine(path: pathlib.Path) -> int:
    """e_machine of a 64-bit little-endian ELF; raises on anything else."""
    head = path.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    if head[4] != 2 or head[5] != 1:
        raise ValueError(f"{path} is not a 64-bit little-endian ELF (class {head[4]}, data {head[5]})")
    return struct.unpack_from("<H", head, 18)[0]


class Loader(yaml.SafeLoader):
    pass


# The built template keeps the short-form intrinsics (!Ref, !Sub, ...): read them as plain data.
Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def built_functions() -> dict:
    path = BUILD / "template.yaml"
    if not path.exists():
        pytest.fail(f"{path} missing: run infra/sam-build.sh (make sam-build) first")
    template = yaml.load(path.read_text(), Loader=Loader)
    return {name: r["Properties"] for name, r in template["Resources"].items()
            if r["Type"] == "AWS::Serverless::Function"}


def newest_source() -> tuple[float, pathlib.Path]:
    sources = [REPO / "Cargo.toml", REPO / "Cargo.lock", *(REPO / "src").rglob("*.rs")]
    return max((p.stat().st_mtime, p) for p in sources)


def test_the_check_tells_architectures_apart():
    """The header check reads a real x86_64 ELF of this machine as x86_64 (so it can fail)."""
    assert elf_machine(pathlib.Path("/bin/sh").resolve()) == EM_X86_64
    with pytest.raises(ValueError):
        elf_machine(REPO / "Cargo.toml")


def test_both_functions_get_a_fresh_aarch64_bootstrap():
    functions = built_functions()
    assert set(functions) == {"TickFunction", "InterruptionFunction"}, set(functions)
    newest, newest_path = newest_source()
    for name, props in functions.items():
        bootstrap = BUILD / props["CodeUri"] / "bootstrap"
        assert bootstrap.is_file(), f"{name}: no {bootstrap}"
        assert elf_machine(bootstrap) == EM_AARCH64, f"{name}: {bootstrap} is not aarch64"
        assert bootstrap.stat().st_mtime > newest, (
            f"{name}: {bootstrap} is older than {newest_path.relative_to(REPO)}: not rebuilt")
        print(f"{name}: {bootstrap.relative_to(REPO)} {bootstrap.stat().st_size} bytes, aarch64")
