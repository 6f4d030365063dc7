"""The drain over real HTTP: gpunode/kube_api.py's client (urllib) against a local HTTP server that answers as the
API server does (tests/kube_api_standin.py), the kubeconfig read the way client-go names its fields."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from gpunode.errors import GpunodeError, UsageError
from gpunode.kube_api import http_api, load_kubeconfig
from gpunode.kube_drain import Call, DrainError, DrainOptions, drain, uncordon
from tests.kube_api_standin import StandIn

TOKEN = "s3cr3t-token-value"


@pytest.fixture
def server():
    standin = StandIn.from_case({"node": {"name": "gpu-1"}, "pods": [{"name": "web-a", "labels": {"app": "web"}}],
                                 "pdbs": [{"name": "web-pdb", "match": {"app": "web"}, "desired": 2, "current": 2,
                                           "allowed": 0, "heals_after": 1}]})
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append({"auth": self.headers.get("Authorization", ""),
                         "type": self.headers.get("Content-Type", "")})
            reply = standin(Call(self.command, self.path, body, self.headers.get("Content-Type", "")
                                 if self.command == "PATCH" else ""))
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _answer

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", standin, seen
    httpd.shutdown()


def kubeconfig(tmp_path, server_url, **user):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": server_url}}],
        "users": [{"name": "admin", "user": user or {"token": TOKEN}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "admin"}}]}))
    return path


def test_a_drain_and_uncordon_over_http(server, tmp_path):
    url, standin, seen = server
    api = http_api(load_kubeconfig(kubeconfig(tmp_path, url)))
    result = drain(api, "gpu-1", DrainOptions(), sleep=lambda s: None)
    assert result.evicted == ["default/web-a"]
    assert [c.line() for c in standin.calls if c.method != "GET"] == [
        "PATCH /api/v1/nodes/gpu-1", "POST /api/v1/namespaces/default/pods/web-a/eviction",
        "POST /api/v1/namespaces/default/pods/web-a/eviction"]  # the first answered 429 over HTTP, then retried
    assert standin.node["spec"] == {"unschedulable": True}
    uncordon(api, "gpu-1")
    assert standin.node["spec"] == {}
    assert {s["auth"] for s in seen} == {f"Bearer {TOKEN}"}
    assert "application/strategic-merge-patch+json" in {s["type"] for s in seen}


def test_the_pdb_refusal_arrives_as_an_answer_with_its_budget(server, tmp_path):
    url, standin, _ = server
    standin.pdbs[0]["heals_after"] = -1
    api = http_api(load_kubeconfig(kubeconfig(tmp_path, url)))
    with pytest.raises(DrainError) as caught:
        drain(api, "gpu-1", DrainOptions(max_attempts=2), sleep=lambda s: None)
    assert "PodDisruptionBudget web-pdb refused it" in str(caught.value)


def test_the_token_is_in_no_error_and_no_repr(tmp_path):
    cfg = load_kubeconfig(kubeconfig(tmp_path, "http://127.0.0.1:9"))
    assert TOKEN not in repr(cfg)
    with pytest.raises(GpunodeError) as caught:
        http_api(cfg, timeout=2)(Call("GET", "/api/v1/nodes/gpu-1"))
    assert TOKEN not in str(caught.value) + caught.value.fix and "127.0.0.1:9" in str(caught.value)


def test_kubeconfig_data_fields_and_errors(tmp_path):
    user = {"client-certificate-data": base64.b64encode(b"CERT").decode(),
            "client-key-data": base64.b64encode(b"KEY").decode()}
    path = kubeconfig(tmp_path, "https://10.0.0.1:6443", **user)
    cfg = load_kubeconfig(path)
    assert (cfg.server, cfg.cert_pem, cfg.key_pem, cfg.token) == ("https://10.0.0.1:6443", b"CERT", b"KEY", "")
    with pytest.raises(UsageError) as caught:
        load_kubeconfig(path, context="prod")
    assert "no context named 'prod'" in str(caught.value) and "get-contexts" in caught.value.fix
    with pytest.raises(UsageError):
        load_kubeconfig(tmp_path / "missing")


def test_the_cli_drains_checks_and_uncordons(server, tmp_path):
    from tests.conftest import run_cli

    url, standin, _ = server
    config = str(kubeconfig(tmp_path, url))
    planned = run_cli("k8s-drain", "gpu-1", "--kubeconfig", config, "--check")
    assert planned.code == 0, planned.output
    assert 'would: PATCH /api/v1/nodes/gpu-1 {"spec": {"unschedulable": true}}' in planned.stdout
    assert "would: POST /api/v1/namespaces/default/pods/web-a/eviction" in planned.stdout
    assert standin.node["spec"] == {} and not [c for c in standin.calls if c.method != "GET"]
    refused = run_cli("k8s-drain", "gpu-1", "--kubeconfig", config, "--max-attempts", "1")
    assert refused.code == 1 and "PodDisruptionBudget web-pdb refused it" in refused.stderr, refused.output
    assert "kubectl get pdb web-pdb -n default" in refused.stderr
    done = run_cli("k8s-drain", "gpu-1", "--kubeconfig", config, "--max-attempts", "1")  # the budget healed
    assert done.code == 0 and "node gpu-1 drained: evicted default/web-a" in done.stdout, done.output
    back = run_cli("k8s-drain", "gpu-1", "--kubeconfig", config, "--uncordon")
    assert back.code == 0 and "node gpu-1 uncordoned" in back.stdout and standin.node["spec"] == {}
    assert TOKEN not in planned.output + refused.output + done.output + back.output


def test_the_cli_refuses_bad_input_with_exit_2(tmp_path):
    from tests.conftest import run_cli

    result = run_cli("k8s-drain", "gpu-1", "--kubeconfig", str(tmp_path / "nope"))
    assert result.code == 2 and "cannot read it" in result.stderr and "--kubeconfig PATH" in result.stderr
    result = run_cli("k8s-drain", "gpu-1", "--kubeconfig", str(kubeconfig(tmp_path, "http://x")), "--max-attempts",
                     "many")
    assert result.code == 2, result.output


def test_a_broken_kubeconfig_is_named_with_its_line_and_a_missing_ca_with_its_path(tmp_path):
    """What a user saw from `k8s-drain --kubeconfig` on a cut file: `cannot read it (ParserError)`, and on a CA
    path that does not exist: `a file it names cannot be read (No such file or directory)`, naming neither."""
    cut = tmp_path / "cut.yaml"
    cut.write_text("apiVersion: v1\nkind: Config\nclusters: [\n")
    with pytest.raises(UsageError) as broken:
        load_kubeconfig(cut)
    assert f"kubeconfig {cut}: not valid YAML at line 4" in str(broken.value)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a list\n")
    with pytest.raises(UsageError, match="not a kubeconfig"):
        load_kubeconfig(listed)
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1",
                                                     "certificate-authority": str(tmp_path / "no" / "ca.crt")}}],
              "users": [{"name": "u", "user": {"token": "t0ken"}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path = tmp_path / "ca.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(UsageError) as missing:
        load_kubeconfig(path)
    assert f"a file it names, {tmp_path / 'no' / 'ca.crt'}, cannot be read (No such file or directory)" in str(
        missing.value)
    assert "t0ken" not in str(missing.value) + str(broken.value)
