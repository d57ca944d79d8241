"""The input modes of BoincClient on the REAL BOINC 8.3 server: inline, remote (a URL
volunteers download from), local (a path on the server) and semilocal (a URL the server
fetches), each read back from the workunit's XML in the project database and from the
output the volunteer's run of the app made of it."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from gahp_boinc import InlineInput, Job, RemoteInput, ServerFile, ServerUrl, SyncBoincClient


def _served_url(real_boinc, c: SyncBoincClient, path: Path) -> str:
    """Stage ``path`` on the project and return the URL its web server serves it from
    (the download hierarchy): a file host the volunteer and the server can both reach."""
    (name,) = c.physical_names([path])
    if c.query_files([name]):
        c.upload_files(0, [(name, path)])
    (found,) = (real_boinc.project_dir / "download").glob(f"*/{name}")
    return f"{real_boinc.url}download/{found.parent.name}/{name}"


def test_inline_remote_local_and_semilocal_inputs_reach_the_volunteer(real_boinc, tmp_path):
    tag = f"im{int(time.time() * 1000) % 10**9}"
    remote = tmp_path / "remote.txt"
    remote.write_bytes(f"remote {tag}\n".encode())
    # a file the web server's user can read (pytest's tmp_path is private)
    shared = Path(tempfile.mkdtemp(prefix="gahp-local-input-"))
    try:
        shared.chmod(0o755)
        local = shared / "local.txt"
        local.write_text(f"local {tag}\n")
        local.chmod(0o644)
        content = remote.read_bytes()
        with SyncBoincClient(real_boinc.url, real_boinc.auth) as c:
            url = _served_url(real_boinc, c, remote)
            inline = InlineInput(f"inline {tag}\n")
            jobs = {
                "inline": Job(f"{tag}_inline", ["--cpu_time", "1"], [inline]),
                "remote": Job(
                    f"{tag}_remote",
                    ["--cpu_time", "1"],
                    [RemoteInput(url, len(content), hashlib.md5(content).hexdigest())],
                ),
                "local": Job(f"{tag}_local", ["--cpu_time", "1"], [ServerFile(str(local))]),
                "semilocal": Job(f"{tag}_semilocal", ["--cpu_time", "1"], [ServerUrl(url)]),
            }
            report = c.submit(tag, real_boinc.app, list(jobs.values()))
            assert report.uploaded_files == 0 and report.batch_id > 0
            docs = {
                r["name"]: r["xml_doc"].replace("\\n", "\n")
                for r in real_boinc.sql(
                    f"SELECT name, xml_doc FROM workunit WHERE name LIKE '{tag}%'"
                )
            }
            md5 = hashlib.md5(content).hexdigest()
            # inline: staged by the server as jf_<md5 of the content>
            assert f"<name>{inline.physical_name}</name>" in docs[f"{tag}_inline"]
            # remote: the URL, size and MD5 as given; the server never fetched it
            assert f"<url>{url}</url>" in docs[f"{tag}_remote"]
            assert f"<md5_cksum>{md5}</md5_cksum>" in docs[f"{tag}_remote"]
            assert f"<nbytes>{len(content)}</nbytes>" in docs[f"{tag}_remote"]
            # local: the server copied the file into its download hierarchy
            local_md5 = hashlib.md5(local.read_bytes()).hexdigest()
            assert f"<name>jf_{local_md5}</name>" in docs[f"{tag}_local"]
            # semilocal: the server fetched the URL and staged the content under its own name
            assert f"<name>jf_{md5}</name>" in docs[f"{tag}_semilocal"]
            assert f"<url>{url}</url>" not in docs[f"{tag}_semilocal"]
            try:
                states = c.wait(tag, interval=2, timeout=real_boinc.job_deadline)
                assert set(states.values()) == {"DONE"}, states
                outs = {}
                for kind, job in jobs.items():
                    c.fetch_output(job.name, tmp_path, files={"out": f"{kind}.out"})
                    outs[kind] = (tmp_path / f"{kind}.out").read_text()
            finally:
                c.abort_batch(tag)
                c.retire(tag)
        up = tag.upper()
        assert outs == {
            "inline": f"INLINE {up}\n",
            "remote": f"REMOTE {up}\n",
            "local": f"LOCAL {up}\n",
            "semilocal": f"REMOTE {up}\n",
        }
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        assert not os.path.exists(shared)
