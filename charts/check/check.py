#!/usr/bin/env python3
"""Validates what `helm template` rendered from charts/aoctl, and checks it against the real
`aoctl serve` (run by check.sh, in its venv).

1. Every rendered object is validated: Kubernetes' own kinds with kubernetes-validate (strict:
   unknown fields are errors), the ServiceMonitor against the Prometheus operator's CRD (vendored
   under prometheus-operator/), the chart's CRDs as CustomResourceDefinitions. A kind no schema
   covers is an error, never skipped. The example manifests are validated against the CRDs.
2. The StatefulSet's arguments are those `aoctl serve --help` lists, its ports, probes, Services,
   volumes and ServiceMonitor name each other consistently.
3. `aoctl serve` runs with those very arguments (only the listen address, the paths and, for etcd,
   the endpoints are moved to this machine's own): the probes' paths answer without the token
   with the Host the kubelet sends, /metrics answers with the token the ServiceMonitor sends and
   refuses without it, and the Services' names are allowed hosts while others are not.
"""

import argparse
import base64
import copy
import glob
import http.client
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import jsonschema
import yaml
from kubernetes_validate import utils as kv

HERE = os.path.dirname(os.path.abspath(__file__))
POD_IP = "10.1.2.3"
failures = []


def fail(where, message):
    failures.append(f"{where}: {message}")
    print(f"chart-check: FAIL {where}: {message}", file=sys.stderr)


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def strict(node):
    """An OpenAPI v3 schema of a CRD as a JSON Schema the way the apiserver reads it, except that
    a field the schema does not know is an error here (the apiserver would drop it silently)."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) if k in ("items", "additionalProperties", "not") else v for k, v in node.items()}
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node:
            out[key] = [strict(n) for n in node[key]]
    if "properties" in node:
        out["properties"] = {k: strict(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node:
            out["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    return out


def crd_schemas(crd):
    """`{(apiVersion, kind): JSON Schema}` of a CustomResourceDefinition's served versions."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    found = {}
    for v in crd["spec"]["versions"]:
        if v.get("served"):
            found[(f"{group}/{v['name']}", kind)] = strict(v["schema"]["openAPIV3Schema"])
    return found


def validate_custom(where, doc, schema):
    for e in jsonschema.Draft202012Validator(schema).iter_errors(doc):
        fail(where, f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}")


def validate_all(path, docs, custom, kube_version):
    name = os.path.basename(path)
    for doc in docs:
        where = f"{name}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in custom:
            validate_custom(where, doc, custom[key])
            continue
        try:
            kv.validate(doc, kube_version, strict=True)
        except kv.ValidationError as e:
            fail(where, f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}")
        except kv.SchemaNotFoundError as e:
            fail(where, f"no schema validates it: {e.message}")
    print(f"chart-check: {name}: {len(docs)} objects valid against Kubernetes {kube_version}", file=sys.stderr)


def serve_flags(aoctl):
    """The long flags `aoctl serve` takes, and the values each restricted one allows."""
    text = subprocess.run([aoctl, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    flags, allowed = set(), {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:-\w, )?--([a-z0-9-]+)", line)
        if not m:
            continue
        flags.add(m.group(1))
        values = re.search(r"\[possible values: ([^\]]+)\]", line)
        if values:
            allowed[m.group(1)] = [v.strip() for v in values.group(1).split(",")]
    return flags, allowed


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    return found[0] if len(found) == 1 else None


def check_wiring(name, docs, flags, allowed):
    """Static checks of the StatefulSet against `aoctl serve --help` and the other objects.
    Returns the container and its parsed arguments."""
    sts = one(docs, "StatefulSet")
    if sts is None:
        fail(name, "renders not exactly one StatefulSet")
        return None
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    if "command" in c:
        fail(name, "the container sets a command, which would bypass the image's entrypoint")
    args = c.get("args", [])
    if args[:2] != ["aoctl", "serve"]:
        fail(name, f"the container runs {args[:2]}, not aoctl serve")
    parsed = []
    for a in args[2:]:
        m = re.fullmatch(r"--([a-z0-9-]+)=(.*)", a)
        if not m:
            fail(name, f"argument {a!r} is not --flag=value")
            continue
        flag, value = m.groups()
        if flag not in flags:
            fail(name, f"aoctl serve has no flag --{flag}")
        if flag in allowed and value not in allowed[flag]:
            fail(name, f"--{flag}={value} is not one of {allowed[flag]}")
        parsed.append((flag, value))
    counts = {f: sum(1 for g, _ in parsed if g == f) for f, _ in parsed}
    for f, n in counts.items():
        if n > 1 and f != "allowed-host":
            fail(name, f"--{f} is given {n} times")
    opts = dict(parsed)
    env = {e["name"] for e in c.get("env", [])}
    for a in args:
        for var in re.findall(r"\$\(([A-Z_]+)\)", a):
            if var not in env:
                fail(name, f"argument {a!r} names $({var}), which the container's env does not define")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    listen_port = int(opts.get("listen", ":0").rsplit(":", 1)[1])
    if ports.get("http") != listen_port:
        fail(name, f"container port http is {ports.get('http')}, aoctl listens on {listen_port}")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = c.get(probe, {}).get("httpGet")
        if not get:
            fail(name, f"no {probe}")
        elif get["port"] not in ports and get["port"] not in ports.values():
            fail(name, f"{probe} probes port {get['port']}, which the container does not open")
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])}
    data = opts.get("data-dir")
    if mounts.get(data) is None or (mounts[data] not in volumes and mounts[data] not in claims):
        fail(name, f"--data-dir {data} is not a mounted volume")
    token_dir, token_key = os.path.split(opts.get("token-file", ""))
    secret_volume = volumes.get(mounts.get(token_dir, ""), {}).get("secret")
    if not secret_volume or token_key not in [i["key"] for i in secret_volume.get("items", [])]:
        fail(name, f"--token-file {opts.get('token-file')} is not a key of a mounted Secret")
        secret_volume = {}
    rendered_secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    secret = rendered_secrets.get(secret_volume.get("secretName"))
    if secret is not None and token_key not in secret.get("data", {}):
        fail(name, f"Secret {secret['metadata']['name']} has no key {token_key}")
    services = [d for d in docs if d["kind"] == "Service"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    for svc in services:
        if any(labels.get(k) != v for k, v in svc["spec"]["selector"].items()):
            fail(name, f"Service {svc['metadata']['name']} selects no pod of the StatefulSet")
        for p in svc["spec"]["ports"]:
            if p["targetPort"] not in ports and p["targetPort"] not in ports.values():
                fail(name, f"Service {svc['metadata']['name']} targets port {p['targetPort']}, which no container opens")
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    if [s["metadata"]["name"] for s in headless] != [sts["spec"]["serviceName"]]:
        fail(name, "the StatefulSet's serviceName is not its one headless Service")
    monitor = one(docs, "ServiceMonitor")
    if monitor is not None:
        selected = [s for s in services if all(s["metadata"]["labels"].get(k) == v
                                                 for k, v in monitor["spec"]["selector"]["matchLabels"].items())]
        if len(selected) != 1 or selected[0] in headless:
            fail(name, "the ServiceMonitor does not select exactly the API's Service")
        for ep in monitor["spec"]["endpoints"]:
            if selected and ep["port"] not in [p["name"] for p in selected[0]["spec"]["ports"]]:
                fail(name, f"the ServiceMonitor scrapes port {ep['port']}, which the Service does not name")
            if ep.get("path") != "/metrics":
                fail(name, f"the ServiceMonitor scrapes {ep.get('path')}, not /metrics")
            cred = ep.get("authorization", {}).get("credentials", {})
            if (cred.get("name"), cred.get("key")) != (secret_volume.get("secretName"), token_key):
                fail(name, "the ServiceMonitor's bearer token is not the Secret key the server reads")
    return {"sts": sts, "container": c, "args": args, "opts": opts, "secret": secret, "token_key": token_key,
            "services": services, "monitor": monitor}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, host, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def wait_for(what, deadline, probe):
    while time.monotonic() < deadline:
        try:
            if probe():
                return True
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(what)


def start_etcd(scratch):
    """A one-member etcd cluster on loopback ports, for the etcd case's arguments."""
    binary = os.environ.get("AOCTL_TEST_ETCD", "etcd")
    if shutil.which(binary) is None:
        raise RuntimeError("etcd is needed for the etcd case (Debian: apt-get install etcd-server)")
    client, peer = free_port(), free_port()
    log = open(os.path.join(scratch, "etcd.log"), "w")
    proc = subprocess.Popen([
        binary, "--name", "check", "--data-dir", os.path.join(scratch, "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
        "--initial-cluster", f"check=http://127.0.0.1:{peer}",
    ], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    wait_for("etcd answering", deadline, lambda: get(client, "/health", "127.0.0.1")[0] == 200)
    return proc, f"http://127.0.0.1:{client}"


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def run_live(name, w, aoctl, ns):
    """`aoctl serve` with the StatefulSet's arguments, then the requests the cluster would send."""
    sts, c = w["sts"], w["container"]
    pod_name = f"{sts['metadata']['name']}-0"
    scratch = tempfile.mkdtemp(prefix="aoctl-chart-check-")
    etcd = None
    server = None
    try:
        if w["secret"] is not None:
            token = base64.b64decode(w["secret"]["data"][w["token_key"]]).decode()
        else:
            token = secrets.token_hex(24)
        with open(os.path.join(scratch, "token"), "w") as f:
            f.write(token)
        os.chmod(os.path.join(scratch, "token"), 0o600)
        port = free_port()
        moved = {
            "listen": f"127.0.0.1:{port}",
            "data-dir": os.path.join(scratch, "data"),
            "token-file": os.path.join(scratch, "token"),
        }
        if w["opts"].get("store") == "etcd":
            etcd, moved["etcd-endpoints"] = start_etcd(scratch)
        argv = [aoctl, "serve"]
        for a in w["args"][2:]:
            flag, value = a[2:].split("=", 1)
            value = moved.get(flag, value).replace("$(POD_IP)", POD_IP).replace("$(POD_NAME)", pod_name)
            argv.append(f"--{flag}={value}")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AOCTL_")}
        env["HOME"] = scratch
        log = open(os.path.join(scratch, "serve.log"), "w")
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        try:
            wait_for("/healthz", deadline, lambda: server.poll() is None and get(port, "/healthz", "localhost")[0] == 200)
            wait_for("/readyz", deadline, lambda: get(port, "/readyz", "localhost")[0] == 200)
        except TimeoutError as e:
            with open(os.path.join(scratch, "serve.log")) as f:
                fail(name, f"aoctl serve with the chart's arguments never answered {e}; its log:\n{f.read()[-3000:]}")
            return
        kubelet_host = f"{POD_IP}:{w['opts']['listen'].rsplit(':', 1)[1]}"
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = c[probe]["httpGet"]["path"]
            status, body = get(port, path, kubelet_host)
            if status != 200:
                fail(name, f"{probe} GET {path} with Host {kubelet_host} answered {status}: {body[:200]}")
        status, body = get(port, "/metrics", kubelet_host, token)
        if status != 200 or "aoctl_" not in body:
            fail(name, f"/metrics with the token answered {status}")
        status, _ = get(port, "/metrics", kubelet_host)
        if status != 401:
            fail(name, f"/metrics without the token answered {status}, not 401")
        svc = [s for s in w["services"] if s["spec"].get("clusterIP") != "None"][0]["metadata"]["name"]
        for host in (svc, f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local", "localhost:7420"):
            status, body = get(port, "/apis/ao.dev/v1alpha1/sessions", host, token)
            if status != 200:
                fail(name, f"listing sessions with Host {host} answered {status}: {body[:200]}")
        status, _ = get(port, "/apis/ao.dev/v1alpha1/sessions", "elsewhere.example", token)
        if status != 403:
            fail(name, f"a request for another host answered {status}, not 403")
        print(f"chart-check: {name}: aoctl serve runs with the chart's arguments; probes, metrics and hosts answer",
              file=sys.stderr)
    finally:
        if server is not None:
            stop(server)
        if etcd is not None:
            stop(etcd)
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kube-version", required=True)
    p.add_argument("--aoctl", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("rendered", nargs="+")
    a = p.parse_args()

    custom = {}
    for crd in load(os.path.join(HERE, "prometheus-operator", "monitoring.coreos.com_servicemonitors.yaml")):
        custom.update(crd_schemas(crd))
    ours = {}
    for path in sorted(glob.glob(os.path.join(a.root, "manifests", "crds", "*.yaml"))):
        for crd in load(path):
            ours.update(crd_schemas(crd))
    if len(ours) != 4:
        fail("manifests/crds", f"holds {len(ours)} kinds, not 4")
    custom.update(ours)

    flags, allowed = serve_flags(a.aoctl)
    rendered = {os.path.basename(path): load(path) for path in a.rendered}
    for path in a.rendered:
        name = os.path.basename(path)
        docs = rendered[name]
        validate_all(path, docs, custom, a.kube_version)
        crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
        if sorted(d["metadata"]["name"] for d in crds) != sorted(f"{k[1].lower()}s.ao.dev" for k in ours):
            fail(name, "does not render the four CRDs of manifests/crds")
        w = check_wiring(name, docs, flags, allowed)
        if w is not None and not failures:
            run_live(name, w, a.aoctl, a.namespace)

    examples = sorted(glob.glob(os.path.join(a.root, "manifests", "examples", "**", "*.yaml"), recursive=True)
                      + glob.glob(os.path.join(a.root, "manifests", "gitops-example", "**", "*.yaml"), recursive=True))
    count = 0
    for path in examples:
        for doc in load(path):
            where = f"{os.path.relpath(path, a.root)}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            key = (doc.get("apiVersion"), doc.get("kind"))
            if key not in ours:
                fail(where, "is no kind the CRDs define")
                continue
            validate_custom(where, doc, ours[key])
            count += 1
    print(f"chart-check: {count} example objects valid against the CRDs", file=sys.stderr)

    if failures:
        print(f"chart-check: {len(failures)} failed", file=sys.stderr)
        return 1
    print("chart-check: passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
