"""`pip install ./sdk/python` works offline and installs a package that needs nothing else."""

import os
import shutil
import subprocess
import sys

SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_pip_installs_the_package_with_no_dependencies(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(SDK, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                                "--no-index", "--target", str(target), str(source)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    # Imported from the install alone, in an interpreter that sees no other copy.
    probe = subprocess.run([sys.executable, "-I", "-c",
                            f"import sys; sys.path.insert(0, {str(target)!r}); import smolbox; "
                            "print(smolbox.__file__); print(sorted(smolbox.__all__)[0])"],
                           capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines()[0].startswith(str(target))
    assert probe.stdout.splitlines()[1] == "ApiError"
