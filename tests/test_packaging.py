"""The install README and the Dockerfile promise: the CPU build of torch, no CUDA libraries.

No Docker engine runs here, so the Dockerfile's logic is checked as text: the
torch it installs from the CPU index is the one pyproject pins, before the
package (whose ``torch==X`` the ``X+cpu`` build satisfies), and the build
fails if CUDA comes back.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_pin() -> str:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("torch==")]
    return pin.removeprefix("torch==")


def test_the_dockerfile_installs_the_pinned_cpu_torch_before_the_package() -> None:
    text = (REPO / "Dockerfile").read_text()
    version = re.search(r"^ARG TORCH_VERSION=(\S+)$", text, re.M)
    assert version is not None and version.group(1) == torch_pin()
    cpu = text.index(f'pip install "torch==${{TORCH_VERSION}}" --index-url {CPU_INDEX}')
    package = text.index("&& pip install . &&")
    guard = text.index("assert torch.version.cuda is None")
    assert cpu < package < guard
    assert "grep -i '^nvidia-'" in text


def test_the_readme_says_how_to_get_the_cpu_build() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"pip install torch=={torch_pin()} --index-url {CPU_INDEX}" in readme


def test_this_environment_has_the_cpu_build_and_no_cuda_wheels() -> None:
    assert importlib.metadata.version("torch").endswith("+cpu")
    names = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()}
    assert not [n for n in names if n.startswith("nvidia-")]
