"""The real Ninf-G 5.0.0 client, 20 handles with asynchronous calls, through this project's
``ng_invoke_server.Fork`` and through Ninf-G's own SSH invoke server (``bin/
ng_invoke_server.SSH`` of the bundle, to an sshd this script starts on 127.0.0.1 with keys
it makes).  Both with ``status_polling 1``.

Per server: handle init -> CREATE_NOTIFY (from the tap between client and server: the
``JOB_CREATE`` request to its notification), the whole ``grpc_function_handle_init`` as the
client saw it, and each ``grpc_function_handle_destruct``; median and max, and the ratio
SSH / Fork of the medians.

Needs the bundle (``bash .ci/ninfg-up.sh``), gcc, and ``/usr/sbin/sshd`` (Debian package
openssh-server; the system's sshd is not used or touched).  Runs the sshd as the current
user; as root, ``/run/sshd`` is created if missing (sshd needs it).

Usage: python benchmarks/ninfg_vs_ssh.py [--n N] [--times TRIALS]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ninfg_real"))
import ngkit  # noqa: E402

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def start_sshd(where: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    """An sshd on 127.0.0.1 accepting only the key made here; returns it, its port, the key."""
    where.mkdir(parents=True, exist_ok=True)
    keygen(where / "host_key")
    keygen(where / "user_key")
    (where / "authorized_keys").write_text((where / "user_key.pub").read_text())
    port = free_port()
    config = where / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {where}/host_key\n"
        f"PidFile {where}/sshd.pid\nAuthorizedKeysFile {where}/authorized_keys\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nLogLevel ERROR\nMaxStartups 200\nMaxSessions 200\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)],
        stderr=open(where / "sshd.log", "wb"),  # noqa: SIM115 (the child keeps it)
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port, where / "user_key"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"sshd did not start: {(where / 'sshd.log').read_text()}")


def ssh_options(port: int, key: Path) -> list[str]:
    opts = [
        f"-p {port}",
        f"-i {key}",
        "-o StrictHostKeyChecking=no",
        "-o UserKnownHostsFile=/dev/null",
        "-o BatchMode=yes",
        "-o LogLevel=ERROR",
    ]
    return [f'invoke_server_option "ssh_option {o}"' for o in opts]


def measure(client: ngkit.NgClient, n: int, times: int) -> dict[str, list[float]]:
    client.executable = client.sample / "_stub_pi_trial"
    client.invoke_lines.append("status_polling 1")
    result = client.run("handles", n, times)
    if result.rc != 0:
        raise SystemExit(f"{client.kind}: client exit {result.rc}\n{result.stdout}")
    sent = {line.split()[1]: t for t, line in result.lines("C>") if line.startswith(b"JOB_CREATE ")}
    notified = {
        line.split()[1]: t for t, line in result.lines("E<") if line.startswith(b"CREATE_NOTIFY ")
    }
    steps = result.steps
    return {
        "JOB_CREATE -> CREATE_NOTIFY": [notified[k] - sent[k] for k in sent],
        "grpc_function_handle_init": [
            s.t - steps[i - 1].t
            for i, s in enumerate(steps)
            if s.what.startswith("grpc_function_handle_init[")
        ],
        "grpc_function_handle_destruct": [
            s.t - steps[i - 1].t
            for i, s in enumerate(steps)
            if s.what.startswith("grpc_function_handle_destruct[")
        ],
    }


def report(fork: dict[str, list[float]], ssh: dict[str, list[float]]) -> None:
    print(
        f"{'latency (s)':32} {'Fork median':>12} {'max':>7} {'SSH median':>12} {'max':>7}"
        f" {'SSH/Fork':>9}"
    )
    for name in fork:
        f, s = fork[name], ssh[name]
        fm, sm = statistics.median(f), statistics.median(s)
        ratio = sm / fm if fm > 0 else float("inf")
        print(f"{name:32} {fm:12.3f} {max(f):7.3f} {sm:12.3f} {max(s):7.3f} {ratio:9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="handles (default 20)")
    parser.add_argument("--times", type=int, default=100000, help="trials per call")
    args = parser.parse_args()
    if not Path(SSHD).exists():
        raise SystemExit(f"{SSHD} missing: apt-get install openssh-server")
    with tempfile.TemporaryDirectory(prefix="ninfg-vs-ssh-") as tmp:
        work = Path(tmp)
        ng_dir, reason = ngkit.find_ng_dir(work / "bundle")
        if ng_dir is None:
            raise SystemExit(reason)
        sample = ngkit.build_sample(ng_dir, work / "build")
        servers = ngkit.write_invoke_servers(work / "servers")
        (servers / "ng_invoke_server.SSH").symlink_to(ng_dir / "bin/ng_invoke_server.SSH")
        sshd, port, key = start_sshd(work / "sshd")
        try:
            fork = measure(
                ngkit.NgClient(ng_dir, sample, servers, "Fork", work / "fork", {}),
                args.n,
                args.times,
            )
            ssh_client = ngkit.NgClient(ng_dir, sample, servers, "SSH", work / "ssh", {})
            ssh_client.server_lines += ssh_options(port, key)
            ssh = measure(ssh_client, args.n, args.times)
        finally:
            sshd.terminate()
            sshd.wait(10)
    print(f"{args.n} handles, one async call each ({args.times} trials), status_polling 1")
    report(fork, ssh)


if __name__ == "__main__":
    main()
