"""Numbers that cannot be meant (no rounds, negative samples, timeouts or budgets) are usage
errors with a plain message, in the CLI (exit 2) and in the magic (UsageError), never a run."""
import pytest
from IPython.core.error import UsageError

from tests.test_magic import ip, magics  # noqa: F401

BAD = [("--iterations", "0"), ("--iterations", "-1"), ("--samples", "-2"), ("--timeout", "-5"),
       ("--max-cost", "0"), ("--wall-time", "-1"), ("--trials", "0")]


@pytest.mark.parametrize("flag,value", BAD)
@pytest.mark.slow     # a `kforge` process per row (test_cli.py has the fast one)
def test_the_cli_refuses_numbers_that_cannot_be_meant(kforge_cli, flag, value):
    done = kforge_cli("run", "problem.py", flag, value)
    assert done.returncode == 2
    assert f"argument {flag}: must be above 0, not {value}" in done.stderr


def test_the_cli_refuses_negative_patience(kforge_cli):
    done = kforge_cli("run", "problem.py", "--patience", "-1")
    assert done.returncode == 2 and "must be 0 or more, not -1" in done.stderr


@pytest.mark.parametrize("flag,value", [("--iterations", "0"), ("--samples", "-1")])
def test_the_magic_refuses_them_too(ip, flag, value):  # noqa: F811
    with pytest.raises(UsageError) as caught:
        ip.run_cell_magic("kforge", f"{flag} {value}", "import torch\n")
    assert "must be above 0" in str(caught.value)
    assert not magics(ip).sessions or all(not s.running for s in magics(ip).sessions.values())
