import pytest
from cfnlint.decode import decode

from infra_paths import REPO


@pytest.fixture(scope="session")
def template() -> dict:
    """template.yaml through cfn-lint's decoder (intrinsics as {"Ref": ...}, {"Fn::If": ...})."""
    tpl, matches = decode(str(REPO / "template.yaml"))
    assert not matches, matches
    return tpl


@pytest.fixture(scope="session")
def repo():
    return REPO
