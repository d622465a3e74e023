"""The release files (scripts/release.sh, run by `make sam-build` and `make release`): what a
user downloads to deploy without Rust. Needs PREWARM_RELEASE_DIR and PREWARM_RELEASE_VERSION
(the Makefile sets both) and the `sam build` artifact the release was made from.
"""

import hashlib
import os
import pathlib
import subprocess
import sys
import tarfile
import zipfile

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
EM_AARCH64 = 183
# A Lambda zip is uploaded as is; a stripped, size-optimised prewarm is a few MB.
MAX_ZIP_BYTES = 8 * 1024 * 1024

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from test_sam_bootstrap import Loader, elf_machine  # noqa: E402


@pytest.fixture(scope="module")
def release() -> tuple[pathlib.Path, str]:
    folder, version = os.environ.get("PREWARM_RELEASE_DIR"), os.environ.get("PREWARM_RELEASE_VERSION")
    if not folder or not version:
        pytest.fail("PREWARM_RELEASE_DIR and PREWARM_RELEASE_VERSION unset: run `make sam-build`")
    return pathlib.Path(folder), version


def test_the_folder_holds_exactly_the_release_files_and_their_sums(release):
    folder, version = release
    names = {f"prewarm-{version}-arm64.zip", f"prewarm-{version}.yaml",
             f"prewarm-chart-{version}.tgz"}
    assert {p.name for p in folder.iterdir()} == names | {"SHA256SUMS"}
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.lstrip("*")] = digest
    assert set(sums) == names
    for name, digest in sums.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


def test_the_zip_is_the_checked_aarch64_bootstrap_alone_and_small(release):
    folder, version = release
    path = folder / f"prewarm-{version}-arm64.zip"
    assert path.stat().st_size < MAX_ZIP_BYTES, f"{path.stat().st_size} bytes"
    with zipfile.ZipFile(path) as z:
        assert z.namelist() == ["bootstrap"]
        info = z.getinfo("bootstrap")
        # Lambda's custom runtime executes it: the Unix mode must carry the execute bits.
        assert (info.external_attr >> 16) & 0o777 == 0o755
        body = z.read("bootstrap")
    # sam build makes one folder per function, or one shared folder for both.
    built = {p.read_bytes() for p in (REPO / ".aws-sam/build").glob("*/bootstrap")}
    assert built == {body}, "the zip is not the one bootstrap sam build made"
    unpacked = folder.parent / "bootstrap.check"
    unpacked.write_bytes(body)
    try:
        assert elf_machine(unpacked) == EM_AARCH64
    finally:
        unpacked.unlink()
    print(f"{path.name}: {path.stat().st_size} bytes zipped, {len(body)} unzipped")


def load(path: pathlib.Path) -> dict:
    return yaml.load(path.read_text(), Loader=Loader)


def test_the_template_is_the_repository_one_pointing_at_the_zip(release):
    folder, version = release
    got = load(folder / f"prewarm-{version}.yaml")
    # The expectation, by hand from template.yaml: the edits the release makes, no more.
    want = load(REPO / "template.yaml")
    want["Globals"]["Function"]["CodeUri"] = f"prewarm-{version}-arm64.zip"
    for name in ("TickFunction", "InterruptionFunction"):
        meta = want["Resources"][name]["Metadata"]
        del meta["BuildMethod"], meta["BuildProperties"]
    want["Parameters"]["Architecture"]["AllowedValues"] = ["arm64"]
    app = want["Metadata"]["AWS::ServerlessRepo::Application"]
    app["SemanticVersion"] = version
    # `make release SOURCE_URL=...`: the repository the release comes from.
    if source_url := os.environ.get("PREWARM_RELEASE_SOURCE_URL"):
        app["HomePageUrl"] = app["SourceCodeUrl"] = source_url
    assert got == want
    assert (folder / got["Globals"]["Function"]["CodeUri"]).is_file()


def test_the_template_lints_clean_where_the_repository_one_does(release):
    folder, version = release
    cfn_lint = pathlib.Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run(
        [str(cfn_lint), str(folder / f"prewarm-{version}.yaml"), "-a", "cfn_lint_serverless.rules"],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_chart_carries_the_release_version(release):
    folder, version = release
    with tarfile.open(folder / f"prewarm-chart-{version}.tgz") as tar:
        chart = yaml.safe_load(tar.extractfile("prewarm/Chart.yaml").read())
        names = tar.getnames()
    assert chart["version"] == version and chart["appVersion"] == version
    assert "prewarm/values.schema.json" in names and "prewarm/templates/NOTES.txt" in names
