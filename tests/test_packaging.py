"""The install the README and the Dockerfile promise: no torch, no CUDA, nothing downloaded at run time.

No Docker engine runs here, so the Dockerfile's logic is checked as text:
it installs the package alone (no torch first) and the build fails if
torch or CUDA libraries get in. The torch of the ``sentence-transformers``
extra is the CPU build, installed first from PyTorch's CPU index.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
HEAVY = re.compile(r"^(torch|triton|nvidia-|cuda|sentence-transformers|transformers)", re.I)


def project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project


def names(requirements: object) -> list[str]:
    assert isinstance(requirements, list)
    return [re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0] for r in requirements]


def test_the_default_dependencies_bring_no_torch() -> None:
    assert not [n for n in names(project()["dependencies"]) if HEAVY.match(n)]
    extras = project()["optional-dependencies"]
    assert isinstance(extras, dict)
    test = names(extras["test"])
    assert not [n for n in test if HEAVY.match(n)]  # README's test command: no torch either
    assert "paperclip-proxy[postgres,e5]" in extras["test"]  # and no extra that brings it


def torch_pin() -> str:
    extras = project()["optional-dependencies"]
    assert isinstance(extras, dict)
    (pin,) = [d for d in extras["sentence-transformers"] if d.startswith("torch==")]
    return str(pin).removeprefix("torch==")


def test_the_dockerfile_installs_no_torch_and_fails_if_it_gets_in() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert "torch==" not in text and "--index-url" not in text
    assert "&& pip install . &&" in text
    guard = re.search(r"pip list 2>/dev/null \| grep -iE '(\S+)'", text)
    assert guard is not None and guard.group(1) == "^(torch|triton|nvidia-|cuda)"
    assert text.index("&& pip install . &&") < guard.start()
    assert "BundledEmbedder()" in text  # the packaged model's pinned files checked at build time


def test_the_readme_says_how_to_get_the_cpu_build_for_the_extra() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"pip install torch=={torch_pin()} --index-url {CPU_INDEX}" in readme
    assert "pip install -e '.[sentence-transformers]'" in readme


def test_this_environment_has_no_cuda_wheels() -> None:
    installed = {d.metadata["Name"].lower() for d in importlib.metadata.distributions()}
    assert not [n for n in installed if n.startswith(("nvidia-", "triton", "cuda"))]
    if "torch" in installed:  # the extra's virtualenv
        assert importlib.metadata.version("torch").endswith("+cpu")


def quickstart_commands() -> list[str]:
    """The commands of README's Quickstart: its first code block after the heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quickstart\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None, "README has no Quickstart code block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_quickstart_is_two_commands_and_ci_runs_its_test_command() -> None:
    serve, suite = quickstart_commands()
    assert serve.endswith("paperclip serve") and "pytest" in suite
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    # The same command, as a line of its own; "|| exit $?" makes a failed install inside it fail the run.
    assert f"{suite} || exit $?" in ci


def test_every_data_file_a_module_reads_beside_itself_is_in_the_wheel() -> None:
    """A file read as ``Path(__file__).with_name("x.json")`` is declared package data, or a wheel lacks it."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["proxy"]
    read = set()
    for module in (REPO / "proxy").rglob("*.py"):
        for name in re.findall(r'with_name\("([^"]+\.(?:json|yaml|md|html))"\)', module.read_text()):
            read.add((module.parent / name).relative_to(REPO / "proxy").as_posix())
    assert read and read <= set(declared), read - set(declared)
