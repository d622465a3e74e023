import pytest

from infra_paths import REPO


@pytest.fixture(scope="session")
def repo():
    return REPO
