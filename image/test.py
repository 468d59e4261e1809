#!/usr/bin/env python3
"""haptic's image under a real container runtime: containerd and runc from
Debian, a private containerd instance (its own root, state and socket, so it
touches no other containerd on the machine).

    image/test.py <image archive> [--bench]

1. `haptic --version` and `haproxy -v` run in the image; the image has no
   shell.
2. A cold `haptic render` in the image takes every bundled library from the
   precompiled compile cache (a miss would have to write to the read-only
   root and wasmtime would say so).
3. The HAProxy pod's two containers as the chart runs them: `haptic haproxy`
   and `haptic agent` sharing the configuration volume and /tmp, read-only
   root filesystem, uid 65532, every capability dropped, no new privileges,
   seccomp's default profile; the kernel's view of each process is checked,
   not the runtime's flags.
4. A bundle applied through the agent's API (bearer token), then traffic
   through that HAProxy to a backend on the host: every request counted.
5. The chart's preStop (`haptic soft-stop`) run in the HAProxy container
   while a request is held: the listener closes, the held request is served
   in full, HAProxy exits 0 and the hook returns.

--bench adds the cold-start figures: `haptic render` in a fresh container
with the precompiled cache and with an empty one.
"""

import argparse
import hashlib
import http.client
import http.server
import json
import os
import shutil
import socket
import struct
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

IMAGE_UID = 65532
CONFIG_DIR = "/var/lib/haptic/haproxy"
TOKEN = "image-test-token"
NAMESPACE = "haptic-image-test"
REQUESTS = 200
HELD_SECONDS = 3

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


class Failed(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except OSError:
            pass
        time.sleep(interval)
    raise Failed(f"timed out after {timeout:.0f} s waiting for {what}")


class Containerd:
    """A private containerd: `ctr` against its own socket and namespace."""

    def __init__(self, work):
        self.work = work
        self.socket = os.path.join(work, "containerd.sock")
        config = os.path.join(work, "containerd.toml")
        with open(config, "w") as f:
            # CRI is the kubelet's business (the real-node test bed); this test
            # drives containerd directly. restrict_oom_score_adj would be set
            # there because this VM withholds CAP_SYS_RESOURCE.
            f.write(
                "version = 2\n"
                f'root = "{work}/root"\n'
                f'state = "{work}/state"\n'
                'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                f'[grpc]\n  address = "{self.socket}"\n'
                f'[ttrpc]\n  address = "{self.socket}.ttrpc"\n'
            )
        self.log = open(os.path.join(work, "containerd.log"), "w")
        self.proc = subprocess.Popen(
            ["containerd", "--config", config], stdout=self.log, stderr=subprocess.STDOUT
        )
        wait_for("containerd's socket", lambda: self.ctr("version", check=False).returncode == 0)

    def ctr(self, *args, check=True, timeout=120, **kw):
        proc = subprocess.run(
            ["ctr", "--address", self.socket, "--namespace", NAMESPACE, *args],
            capture_output=True, text=True, timeout=timeout, **kw,
        )
        if check and proc.returncode != 0:
            raise Failed(f"ctr {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        return proc

    def stop(self):
        for line in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
            self.ctr("tasks", "kill", "-s", "SIGKILL", line, check=False)
        time.sleep(0.5)
        for line in self.ctr("containers", "ls", "-q", check=False).stdout.split():
            self.ctr("tasks", "delete", "-f", line, check=False)
            self.ctr("containers", "delete", line, check=False)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# What the chart's securityContext asks of every container, as ctr flags.
CAPABILITIES = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]
RESTRICTED = ["--read-only", "--seccomp", "--net-host"] + [
    flag for cap in CAPABILITIES for flag in ("--cap-drop", cap)
]


def bind(src, dst, mode="rw"):
    return ["--mount", f"type=bind,src={src},dst={dst},options=rbind:{mode}"]


def run_once(ctd, image, name, *command, mounts=(), env=()):
    """Runs a command in a fresh restricted container; returns (code,
    stdout, stderr)."""
    args = ["run", "--rm", *RESTRICTED, *mounts]
    for e in env:
        args += ["--env", e]
    proc = ctd.ctr(*args, image, name, *command, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def task_pid(ctd, name):
    for line in ctd.ctr("tasks", "ls").stdout.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == name:
            return int(fields[1])
    raise Failed(f"no task {name}")


def task_status(ctd, name):
    for line in ctd.ctr("tasks", "ls").stdout.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == name:
            return fields[2]
    return None


def kernel_view(pid):
    """What the kernel says about a container's main process."""
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    root_options = None
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/":
                root_options = fields[5].split(",")
    return status, root_options


def check_restricted(pid, what):
    status, root_options = kernel_view(pid)
    uids = status["Uid"].split()
    gids = status["Gid"].split()
    problems = []
    if set(uids) != {str(IMAGE_UID)}:
        problems.append(f"uids {uids}, want {IMAGE_UID}")
    if set(gids) != {str(IMAGE_UID)}:
        problems.append(f"gids {gids}, want {IMAGE_UID}")
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
        if int(status[cap], 16) != 0:
            problems.append(f"{cap} {status[cap]}, want none")
    if status.get("NoNewPrivs") != "1":
        problems.append(f"NoNewPrivs {status.get('NoNewPrivs')}")
    if status.get("Seccomp") != "2":
        problems.append(f"Seccomp mode {status.get('Seccomp')}, want 2 (filter)")
    if not root_options or "ro" not in root_options:
        problems.append(f"root mounted {root_options}, want ro")
    if problems:
        raise Failed(f"{what} (pid {pid}) is not restricted as the chart asks: " + "; ".join(problems))
    print(f"ok: {what} runs as {IMAGE_UID}, no capabilities, no new privileges, seccomp, read-only root")


# ------------------------------------------------------------------ backend


class Backend:
    """An HTTP server on the host: `/slow` answers after HELD_SECONDS."""

    def __init__(self):
        self.port = free_port()
        self.held = threading.Event()
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # One request per connection: HAProxy does not reuse it either.
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                if self.path == "/slow":
                    backend.held.set()
                    time.sleep(HELD_SECONDS)
                    body = b"held request served\n"
                else:
                    body = b"hello from the host backend\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def get(port, path, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": "app.test"})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


# ------------------------------------------------------------------ bundle


def content_id(config, files):
    """Bundle::content_id: length-prefixed config, then path and content."""
    h = hashlib.sha256()
    for part in [config] + [x for f in sorted(files, key=lambda f: f["path"]) for x in (f["path"], f["content"])]:
        data = part.encode()
        h.update(struct.pack(">Q", len(data)))
        h.update(data)
    return "sha256:" + h.hexdigest()


def bundle(http_port, backend_port):
    config = (
        "global\n    default-path config\n    hard-stop-after 30s\n\n"
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n"
        "    timeout server 30s\n    timeout http-keep-alive 5s\n\n"
        f"frontend http\n    bind 127.0.0.1:{http_port}\n    default_backend app\n\n"
        f"backend app\n    server host 127.0.0.1:{backend_port}\n"
    )
    return {"id": content_id(config, []), "config": config, "files": []}


def agent_request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


# ------------------------------------------------------------------ steps


def versions(ctd, image):
    code, out, _ = run_once(ctd, image, "version", "/usr/local/bin/haptic", "--version")
    if code != 0 or not out.startswith("haptic "):
        raise Failed(f"haptic --version in the image: exit {code}:\n{out}")
    print(f"ok: {out.strip()}")
    code, out, _ = run_once(ctd, image, "haproxy-version", "/usr/sbin/haproxy", "-v")
    first = out.splitlines()[0] if out else ""
    if code != 0 or not re.match(r"HAProxy version ([3-9]|[1-9][0-9])\.", first):
        raise Failed(f"haproxy -v in the image: exit {code}, expected 3.0 or newer:\n{out}")
    # One HAProxy validates and serves: the host's (make setup's, the
    # tests') is the image's own package.
    host = os.environ.get("HAPTIC_HAPROXY")
    if host:
        host_first = subprocess.run([host, "-v"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"HAProxy in the image: {first}")
        print(f"HAProxy on the host:  {host_first} ({host})")
        if host_first.split()[2] != first.split()[2]:
            raise Failed(f"the image runs {first.split()[2]} but the host validates with {host_first.split()[2]}")
    print(f"ok: {first}")
    for shell in ("/bin/sh", "/bin/bash", "/usr/bin/apt-get", "/usr/bin/dpkg"):
        code, _, _ = run_once(ctd, image, "no-shell", shell, "-c", "true")
        if code == 0:
            raise Failed(f"the image has {shell}: it should carry no shell or package manager")
    print("ok: no shell, no package manager in the image")


def precompiled(ctd, image, archive, work):
    """A cold render in the image compiles nothing. wasmtime's compile cache
    says so itself (its trace): every library is a lookup (`get_data`), none
    is compiled and stored (`update_data`)."""
    shipped = shipped_modules(archive)
    if len(shipped) < 4:
        raise Failed(f"the image ships {len(shipped)} precompiled modules, want at least the 4 bundled libraries")
    cluster = bind(os.path.join(repo, "examples", "cluster"), "/examples/cluster", "ro")
    env = ["HAPTIC_LOG=warn,wasmtime_internal_cache=trace", "HAPTIC_DEFAULT_CERTIFICATE=/tmp/default.pem"]
    code, out, err = run_once(
        ctd, image, "render", "/usr/local/bin/haptic", "render", "/examples/cluster",
        mounts=cluster + bind(scratch(work, "render-tmp"), "/tmp"), env=env,
    )
    if code != 0 or "frontend" not in out:
        raise Failed(f"haptic render in the image: exit {code}:\n{err[-2000:]}")
    lookups = [line for line in err.splitlines() if "get_data() for path" in line]
    compiles = [line for line in err.splitlines() if "update_data() for path" in line]
    if len(lookups) < 4:
        raise Failed(f"wasmtime's cache saw {len(lookups)} lookups, want one per bundled library:\n{err[-2000:]}")
    if compiles:
        raise Failed(f"haptic render in the image compiled {len(compiles)} of {len(lookups)} modules:\n" + "\n".join(compiles))
    print(f"ok: haptic render in the image validated with HAProxy and compiled nothing "
          f"({len(lookups)} modules from the {len(shipped)} the image ships precompiled)")


def shipped_modules(archive):
    """The image's own precompiled cache, read from its layer in the
    archive (not through the runtime under test)."""
    prefix = "usr/lib/haptic/cache/wasmtime/"
    found = {}
    with tarfile.open(archive) as layout:
        def blob(digest):
            return layout.extractfile("./blobs/" + digest.replace(":", "/"))

        index = json.load(layout.extractfile("./index.json"))
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r:*") as files:
                for member in files:
                    name = member.name.removeprefix("./")
                    if member.isfile() and name.startswith(prefix + "modules/") and not name.endswith(".stats"):
                        data = files.extractfile(member).read()
                        found[name[len(prefix):]] = hashlib.sha256(data).hexdigest()
    return found


def scratch(work, name):
    path = os.path.join(work, name)
    os.makedirs(path, exist_ok=True)
    os.chown(path, IMAGE_UID, IMAGE_UID)
    return path


def bench(ctd, image, work, runs=5):
    cluster = bind(os.path.join(repo, "examples", "cluster"), "/examples/cluster", "ro")
    figures = {}
    for label, cache_env in (("precompiled", []), ("no precompiled (JIT)", ["HAPTIC_PRECOMPILED_DIR=/nonexistent"])):
        times = []
        for i in range(runs):
            tmp = scratch(work, f"bench-{len(figures)}-{i}")
            start = time.monotonic()
            code, _, err = run_once(
                ctd, image, f"bench-{i}", "/usr/local/bin/haptic", "render", "--no-validate",
                "/examples/cluster", mounts=cluster + bind(tmp, "/tmp"),
                env=["HAPTIC_LOG=error", "HAPTIC_DEFAULT_CERTIFICATE=/tmp/default.pem", *cache_env],
            )
            times.append(time.monotonic() - start)
            if code != 0:
                raise Failed(f"bench render: exit {code}:\n{err[-2000:]}")
        figures[label] = times
    print(f"cold start: `ctr run` of `haptic render --no-validate examples/cluster`, n={runs} each")
    for label, times in figures.items():
        times.sort()
        print(f"  {label:18} median {times[len(times) // 2] * 1000:6.0f} ms  max {times[-1] * 1000:6.0f} ms")


def pod(ctd, image, work):
    config = scratch(work, "config")
    tmp = scratch(work, "tmp")
    os.chmod(tmp, 0o1777)
    token = os.path.join(scratch(work, "agent-token"), "token")
    with open(token, "w") as f:
        f.write(TOKEN)
    os.chown(token, IMAGE_UID, IMAGE_UID)
    os.chmod(token, 0o400)
    agent_port, http_port = free_port(), free_port()
    volumes = bind(config, CONFIG_DIR) + bind(tmp, "/tmp")

    def start(name, *command, extra=()):
        log = os.path.join(work, f"{name}.log")
        ctd.ctr("run", "--detach", *RESTRICTED, *volumes, *extra, "--log-uri", f"file://{log}",
                image, name, *command)
        return log

    logs = {
        "haproxy": start("haproxy", "/usr/local/bin/haptic", "haproxy", f"--config-dir={CONFIG_DIR}"),
        "agent": start("agent", "/usr/local/bin/haptic", "agent", f"--config-dir={CONFIG_DIR}",
                       f"--listen=127.0.0.1:{agent_port}", "--token-file=/etc/haptic/agent-token/token",
                       extra=bind(os.path.dirname(token), "/etc/haptic/agent-token", "ro")),
    }
    try:
        for name in ("haproxy", "agent"):
            check_restricted(task_pid(ctd, name), f"the {name} container")
        # The agent is live at once and sees HAProxy's bootstrap worker; it
        # turns ready only once a bundle of the controller's runs.
        def bootstrap_worker():
            status, text = agent_request(agent_port, "GET", "/v1/state")
            return status == 200 and json.loads(text).get("workers")
        wait_for("the agent to see HAProxy's bootstrap worker", bootstrap_worker)
        if get(agent_port, "/readyz")[0] != 503:
            raise Failed("the agent is ready before any bundle was applied")
        print("ok: the agent sees HAProxy's bootstrap worker through the shared volume, not ready yet")

        backend = Backend()
        try:
            apply_and_serve(agent_port, http_port, backend.port)
            graceful_stop(ctd, http_port, backend)
        finally:
            backend.stop()
    except Failed:
        for name, log in logs.items():
            if os.path.exists(log):
                with open(log) as f:
                    sys.stderr.write(f"--- {name} container log ---\n{f.read()[-4000:]}\n")
        raise


def apply_and_serve(agent_port, http_port, backend_port):
    b = bundle(http_port, backend_port)
    status, text = agent_request(agent_port, "POST", "/v1/apply", {"token": {"epoch": 1, "sequence": 1}, "bundle": b})
    if status != 200:
        raise Failed(f"POST /v1/apply: {status} {text}")
    answer = json.loads(text)
    if answer["id"] != b["id"] or answer["state"]["converged"] != b["id"]:
        raise Failed(f"the agent did not converge on the bundle: {text}")
    if get(agent_port, "/readyz")[0] != 200:
        raise Failed("the agent is not ready after its bundle was applied")
    print(f"ok: bundle applied through the agent ({answer['mode']}), HAProxy {answer['state']['haproxy_version']}, agent ready")

    ok, failures = 0, []
    for i in range(REQUESTS):
        try:
            status, body = get(http_port, f"/req/{i}")
            if status == 200 and body == "hello from the host backend\n":
                ok += 1
            else:
                failures.append(f"request {i}: {status} {body!r}")
        except OSError as error:
            failures.append(f"request {i}: {error}")
    print(f"traffic through HAProxy to the host backend: {ok}/{REQUESTS} answered by the backend, {len(failures)} failed")
    if ok < REQUESTS:
        raise Failed("requests failed:\n" + "\n".join(failures[:20]))


def graceful_stop(ctd, http_port, backend):
    held = {}

    def hold():
        try:
            held["answer"] = get(http_port, "/slow", timeout=HELD_SECONDS + 20)
        except OSError as error:
            held["error"] = error

    client = threading.Thread(target=hold)
    client.start()
    if not backend.held.wait(10):
        raise Failed("the held request never reached the backend")
    # The chart's preStop hook, exec'd in the HAProxy container as the kubelet
    # would (same user, capabilities and root as the container).
    started = time.monotonic()
    hook = subprocess.Popen(
        ["ctr", "--address", ctd.socket, "--namespace", NAMESPACE, "tasks", "exec", "--exec-id", "prestop",
         "haproxy", "/usr/local/bin/haptic", "soft-stop", "--delay=0", "--pid=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )

    def refused():
        try:
            socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True

    wait_for("HAProxy to close its listener after SIGUSR1", refused, timeout=5, interval=0.05)
    closed_after = time.monotonic() - started
    client.join(HELD_SECONDS + 25)
    if "answer" not in held:
        raise Failed(f"the held request was cut by the soft stop: {held.get('error')}")
    if held["answer"] != (200, "held request served\n"):
        raise Failed(f"the held request got {held['answer']}")
    try:
        output, _ = hook.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        hook.kill()
        raise Failed("the preStop hook did not return after HAProxy drained")
    # HAProxy is the container's PID 1: when it exits the kernel kills
    # everything left in its PID namespace, the waiting hook included (137),
    # exactly when the hook would have returned on its own.
    if hook.returncode not in (0, 137):
        raise Failed(f"the preStop hook failed ({hook.returncode}): {output}")
    wait_for("the HAProxy task to stop", lambda: task_status(ctd, "haproxy") == "STOPPED", timeout=10)
    code = exit_code(ctd, "haproxy")
    print(f"ok: preStop soft stop closed the listener in {closed_after * 1000:.0f} ms, served the held request "
          f"({HELD_SECONDS} s) in full, HAProxy exited {code}, the hook returned after {time.monotonic() - started:.1f} s")
    if code != 0:
        raise Failed(f"HAProxy exited {code} after a soft stop, want 0")


def exit_code(ctd, name):
    """The exit status of a stopped task: `ctr tasks delete` warns with a
    non-zero one and says nothing of a zero one."""
    err = ctd.ctr("tasks", "delete", name).stderr
    marker = "non-zero exit code "
    if marker in err:
        return int(err.split(marker, 1)[1].split()[0].strip('"'))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive")
    parser.add_argument("--bench", action="store_true", help="print cold-start figures")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("image/test.py runs containerd and so must run as root")
    for tool in ("containerd", "ctr", "runc"):
        if not shutil.which(tool):
            sys.exit(f"image/test.py: {tool} is needed (Debian: apt-get install containerd runc)")
    with open(args.archive, "rb") as f:
        f.read(1)
    work = tempfile.mkdtemp(prefix="haptic-image-test-")
    ctd = Containerd(work)
    started = time.monotonic()
    try:
        ctd.ctr("images", "import", args.archive)
        names = ctd.ctr("images", "ls", "-q").stdout.split()
        if len(names) != 1:
            raise Failed(f"the archive should name one image, containerd has {names}")
        image = names[0]
        print(f"ok: imported {image}")
        versions(ctd, image)
        precompiled(ctd, image, args.archive, work)
        pod(ctd, image, work)
        if args.bench:
            bench(ctd, image, work)
    except Failed as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1
    finally:
        ctd.stop()
        subprocess.run(["umount", "-R", "-q", os.path.join(work, "root")], check=False)
        shutil.rmtree(work, ignore_errors=True)
    print(f"image-test passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
