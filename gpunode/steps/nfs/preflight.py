"""Preflight verdicts from the host's point of view: the name resolves, the ports answer, the export is offered."""

from __future__ import annotations

from gpunode.steps.nfs.fstab import normalize
from gpunode.steps.nfs.state import NfsState

SERVICES = {2049: "NFS", 111: "rpcbind, needed by NFSv3"}


def preflight_problem(state: NfsState, server: str, export: str, v3: bool, timeout: int) -> tuple[str, str] | None:
    """(cause, fix) of the first failing check, or None when all checks that ran passed."""
    if state.addresses is None:
        return None
    if not state.addresses:
        return (f"DNS: this host cannot resolve the NFS server name {server!r}",
                "check the mount target's domain name in the NAS/CFS/EFS console and that the host uses the VPC's "
                "DNS resolver (/etc/resolv.conf); EFS names resolve only inside the VPC, with DNS hostnames on")
    for port in (2049, 111) if v3 else (2049,):
        problem = _port_problem(state, server, port, timeout)
        if problem:
            return problem
    if v3:
        return export_problem(state, server, export)
    return None


def _port_problem(state: NfsState, server: str, port: int, timeout: int) -> tuple[str, str] | None:
    status = state.ports.get(port, "unknown")
    if status == "open":
        return None
    service = f"TCP {port} ({SERVICES[port]})"
    detail = state.port_details.get(port, "")
    if status == "timeout":
        return (f"security group / firewall: no answer from {server} on {service} within {timeout}s; "
                "something drops the traffic",
                f"allow inbound {service} from this host in the mount target's security group or permission group "
                "(and outbound from this host), and check that the address is a mount target in this VPC")
    if status == "refused":
        return (f"{server} refused {service}: nothing listens there, or a firewall rejects it",
                "check that the address is the NFS server / mount target, that its NFS service runs, "
                "and the firewall rules in between")
    return (f"{server} is unreachable on {service}: {detail or status}",
            "check the address (same VPC or a route to it?) and the firewall rules in between")


def offered(export: str, exports: list[tuple[str, str]]) -> bool:
    """True when the export, or a folder above it, is in the server's export list."""
    wanted = normalize(export)
    for path, _ in exports:
        listed = normalize(path)
        if wanted == listed or listed == "/" or wanted.startswith(listed + "/"):
            return True
    return False


def export_problem(state: NfsState, server: str, export: str) -> tuple[str, str] | None:
    """(cause, fix) when the server's export list (showmount -e) rules the export out."""
    if state.showmount == "fail":
        return (f"{server} did not list its exports (showmount -e: {state.showmount_error or 'failed'}): "
                "its MOUNT service (mountd) did not answer",
                "allow the server's mountd port too (rpcinfo -p SERVER lists it), or mount with NFSv4")
    if state.showmount == "ok" and not offered(export, state.exports):
        listed = ", ".join(p for p, _ in state.exports) or "nothing"
        return (f"wrong export path: {server} does not export {export}; it exports: {listed}",
                "use one of the listed exports (or a folder below one); Tencent CFS over NFSv3 exports /<fsid>")
    return None
