"""How long ``paperclip serve`` takes to be ready, first start and next starts, and what the install weighs.

Usage (from the repo root, in its virtualenv)::

    python bench/startup.py                 # one first start, three next starts
    python bench/startup.py --warm 5 --config my.yaml

Each start is ``python -m proxy serve --config proxy.yaml`` (the shipped
defaults: the bundled model, backend auto) in a fresh process, timed from
the spawn to the first 200 of ``/readyz`` (database open, embedding model
loaded), polled every 20 ms; the process is then stopped. The CPU time the
proxy and its finished children (the export) used until then is printed too:
on a machine shared with other work, wall time says more about the others. The embedding
cache is a new temporary ``$XDG_CACHE_HOME`` (``embedding.cache_dir`` is
null in the shipped file), so with a model that is exported to ONNX (any
but ``bundled``, which ships exported) the first start exports it in a child
process (torch) and the next ones load the cached export. Also per
start: the proxy's RSS once ready, and whether torch's library is mapped in
it. The database goes to a temporary ``$PAPERCLIP_DATA_DIR``.

The install: the size on disk of this virtualenv (``sys.prefix``), with the
share of torch and of any CUDA libraries (``nvidia*``, ``triton``) in it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 600.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(config: Path, env: dict[str, str]) -> dict[str, object]:
    """One start to ``/readyz`` 200: seconds, RSS in MB, torch mapped or not."""
    port = free_port()
    command = [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--port", str(port)]
    began = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seconds = wait_ready(port, proc, began)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        return {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds(proc.pid), 2),
            "rss_mb": round(rss_kb / 1024),
            "torch_mapped": "libtorch" in maps,
        }
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process and its finished children (the export): load-independent."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_ready(port: int, proc: subprocess.Popen[bytes], began: float) -> float:
    url = f"http://127.0.0.1:{port}/readyz"
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() - began < READY_TIMEOUT_S:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise SystemExit(f"the proxy exited with status {proc.returncode}:\n{err[-2000:]}")
            try:
                if client.get(url).status_code == 200:
                    return time.perf_counter() - began
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    raise SystemExit(f"not ready after {READY_TIMEOUT_S:.0f} s")


def disk_mb(folder: Path) -> float:
    """Allocated size of the files under ``folder`` (each inode once), like ``du``."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            st = os.lstat(os.path.join(parent, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total / 2**20


def install() -> dict[str, float]:
    prefix = Path(sys.prefix)
    site = next(prefix.glob("lib/python3*/site-packages"))
    cuda = [p for p in site.iterdir() if p.name.startswith(("nvidia", "triton")) and p.is_dir()]
    return {
        "virtualenv_mb": round(disk_mb(prefix)),
        "torch_mb": round(disk_mb(site / "torch")) if (site / "torch").is_dir() else 0,
        "cuda_libraries_mb": round(sum(disk_mb(p) for p in cuda)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "proxy.yaml")
    parser.add_argument("--warm", type=int, default=3, help="next starts to time (default 3)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "startup.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paperclip-startup-") as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": f"{tmp}/cache", "PAPERCLIP_DATA_DIR": tmp}
        env.pop("PAPERCLIP_CONFIG", None)
        first = start(args.config, env)
        print(f"first start (empty cache): {first}", flush=True)
        warm = []
        for i in range(args.warm):
            warm.append(start(args.config, env))
            print(f"next start {i + 1} (cached export): {warm[-1]}", flush=True)
    sizes = install()
    seconds = [float(w["seconds"]) for w in warm]  # type: ignore[arg-type]
    result = {
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "first_start": first,
        "next_starts": warm,
        "next_start_median_s": round(statistics.median(seconds), 2) if seconds else None,
        **sizes,
    }
    print()
    print(f"serve -> /readyz 200, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"  first start (empty cache):      {first['seconds']:>6} s wall, "
        f"{first['cpu_seconds']} s CPU   RSS {first['rss_mb']} MB"
    )
    if seconds:
        cpu = statistics.median(float(w["cpu_seconds"]) for w in warm)  # type: ignore[arg-type]
        print(
            f"  next starts (cached, median of {len(seconds)}): {result['next_start_median_s']:>6} s wall "
            f"(min {min(seconds)}, max {max(seconds)}), {cpu:.2f} s CPU   RSS {warm[0]['rss_mb']} MB   "
            f"torch mapped: {any(w['torch_mapped'] for w in warm)}"
        )
    print(
        f"virtualenv {sizes['virtualenv_mb']} MB on disk: torch {sizes['torch_mb']} MB, "
        f"CUDA libraries {sizes['cuda_libraries_mb']} MB"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
