"""The Kubernetes API over HTTPS for the drain (gpunode/kube_drain.py's `Api`): a kubeconfig's current context read
the way client-go reads it (field names from kubernetes/client-go tools/clientcmd/api/v1/types.go, KUBECONFIG_PIN),
bearer token or client certificate, the cluster's CA. The token and keys are never logged or put in an error."""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpunode.errors import GpunodeError, UsageError
from gpunode.kube_drain import Api, Call, Reply
from gpunode.vendor_facts import Fact, Pin, fact_table, value

KUBECONFIG_PIN = Pin("kubernetes/client-go", "32ce75a7d6bc6960fd048d3d1e3b34185418d8c8")
_TYPES = "tools/clientcmd/api/v1/types.go"
KUBECONFIG = fact_table("kubeconfig", {
    "top": Fact(("clusters", "users", "contexts", "current-context"), KUBECONFIG_PIN.at(_TYPES, "43-49"),
                "Config's fields"),
    "cluster": Fact(("server", "insecure-skip-tls-verify", "certificate-authority", "certificate-authority-data"),
                    KUBECONFIG_PIN.at(_TYPES, "67-79"), "Cluster's fields gpunode reads"),
    "user": Fact(("client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
                  "tokenFile"), KUBECONFIG_PIN.at(_TYPES, "105-121"), "AuthInfo's fields gpunode reads"),
    "context": Fact(("cluster", "user", "namespace"), KUBECONFIG_PIN.at(_TYPES, "154-159"), "Context's fields"),
})


@dataclass(frozen=True)
class ApiConfig:
    """Where the API server is and how to authenticate (repr hides the secrets)."""

    server: str
    ca_pem: bytes = b""
    insecure: bool = False
    token: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = b""

    def __repr__(self) -> str:
        return f"ApiConfig(server={self.server!r}, token={'***' if self.token else ''})"


def _named(config: dict[str, Any], key: str, name: str, where: str) -> dict[str, Any]:
    inner = {"clusters": "cluster", "users": "user", "contexts": "context"}[key]
    for item in config.get(key) or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(inner) or {}
    raise UsageError(f"kubeconfig {where}: no {inner} named {name!r} in `{key}`",
                     fix="kubectl config get-contexts shows the contexts and what they name")


def _data_or_file(obj: dict[str, Any], key: str, base: Path) -> bytes:
    if obj.get(f"{key}-data"):
        return base64.b64decode(obj[f"{key}-data"])
    if obj.get(key):
        return (base / obj[key]).read_bytes()  # relative paths are the kubeconfig's folder's (client-go)
    return b""


def load_kubeconfig(path: str | Path | None = None, context: str = "") -> ApiConfig:
    """The context's cluster and user; `path` defaults to $KUBECONFIG's first file, then ~/.kube/config."""
    where = Path(path or (os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config"))
    try:
        config = yaml.safe_load(where.read_text()) or {}
    except OSError as exc:
        raise UsageError(f"kubeconfig {where}: cannot read it ({type(exc).__name__})",
                         fix="give the cluster's kubeconfig (--kubeconfig PATH, or KUBECONFIG)") from None
    except yaml.YAMLError as exc:  # its line and what is wrong there (never the file's text: it holds secrets)
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"kubeconfig {where}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'unreadable'})",
                         fix="repair the file at that line, or give another (--kubeconfig PATH, or KUBECONFIG)",
                         ) from None
    if not isinstance(config, dict):
        raise UsageError(f"kubeconfig {where}: not a kubeconfig (a YAML mapping with clusters, users, contexts)",
                         fix="give the cluster's kubeconfig (--kubeconfig PATH, or KUBECONFIG)")
    name = context or config.get("current-context") or ""
    if not name:
        raise UsageError(f"kubeconfig {where}: no current-context and no context named",
                         fix="kubectl config use-context NAME, or --context NAME")
    ctx = _named(config, "contexts", name, str(where))
    cluster = _named(config, "clusters", ctx.get("cluster", ""), str(where))
    user = _named(config, "users", ctx.get("user", ""), str(where))
    if not str(cluster.get("server", "")).startswith(("https://", "http://")):
        raise UsageError(f"kubeconfig {where}: cluster {ctx.get('cluster')!r} has no https:// server",
                         fix="the cluster entry needs `server: https://HOST:6443`")
    try:
        token = user.get("token") or ((where.parent / user["tokenFile"]).read_text().strip()
                                      if user.get("tokenFile") else "")
        return ApiConfig(cluster["server"].rstrip("/"), _data_or_file(cluster, "certificate-authority", where.parent),
                         bool(cluster.get("insecure-skip-tls-verify")), token,
                         _data_or_file(user, "client-certificate", where.parent),
                         _data_or_file(user, "client-key", where.parent))
    except OSError as exc:
        named = f", {exc.filename}," if exc.filename else ""
        raise UsageError(f"kubeconfig {where}: a file it names{named} cannot be read ({exc.strerror})",
                         fix="the certificate, key and token files it names must exist (relative paths are "
                             "the kubeconfig's folder's)") from None


def _ssl_context(cfg: ApiConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=cfg.ca_pem.decode() if cfg.ca_pem else None)
    if cfg.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cfg.cert_pem and cfg.key_pem:
        with tempfile.TemporaryDirectory() as folder:  # ssl reads a chain from files only; 0700, gone at once
            cert, key = Path(folder) / "c.pem", Path(folder) / "k.pem"
            cert.write_bytes(cfg.cert_pem)
            key.touch(mode=0o600)
            key.write_bytes(cfg.key_pem)
            context.load_cert_chain(cert, key)
    return context


def http_api(cfg: ApiConfig, timeout: float = 30.0) -> Api:
    """An `Api` that sends each Call to the server and returns its status and JSON body (errors included: a 429 is
    an answer, not an exception). Unreachable servers raise GpunodeError naming the server, never the token."""
    context = _ssl_context(cfg) if cfg.server.startswith("https://") else None

    def send(call: Call) -> Reply:
        data = json.dumps(call.body).encode() if call.body is not None else None
        request = urllib.request.Request(cfg.server + call.path, data=data, method=call.method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", call.content_type or "application/json")
        if cfg.token:
            request.add_header("Authorization", f"Bearer {cfg.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
                return Reply(answer.status, _json(answer.read()))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, _json(exc.read()))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GpunodeError(f"Kubernetes API {cfg.server}: {call.method} {call.path.split('?')[0]} failed: "
                               f"{reason}", fix="check the server address, the network and the CA in the "
                               "kubeconfig") from None

    return send


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return {"message": raw[:200].decode(errors="replace")}


def kubeconfig_fields() -> dict[str, tuple[str, ...]]:
    """The kubeconfig fields gpunode reads, by object (for docs and tests)."""
    return {key: value(KUBECONFIG, key) for key in ("top", "cluster", "user", "context")}
