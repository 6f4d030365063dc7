"""The floor: what any paramiko tool pays at least. One connection and one command (`true`) per host, one thread
per host, host keys verified the way gpunode verifies them; then close. Run as its own process by the bench, with
gpunode's python (the same paramiko).

Usage: python bench/floor.py --user U --key KEY --known-hosts FILE HOST[:PORT]...
Prints one line per host; exit 0 when every host ran the command with exit status 0, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
import threading

import paramiko

COMMAND = "true"
TIMEOUT_SECONDS = 30.0


def run_one(address: str, port: int, user: str, key: str, known_hosts: str) -> int:
    """Connect (known_hosts verified, unknown keys refused), run COMMAND, close; its exit status."""
    client = paramiko.SSHClient()
    client.load_system_host_keys()
    client.get_host_keys().load(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(address, port=port, username=user, key_filename=[key], timeout=TIMEOUT_SECONDS,
                       banner_timeout=TIMEOUT_SECONDS, auth_timeout=TIMEOUT_SECONDS, allow_agent=False,
                       look_for_keys=False)
        channel = client.get_transport().open_session()
        channel.exec_command(COMMAND)
        return channel.recv_exit_status()
    finally:
        client.close()


def parse_target(text: str) -> tuple[str, int]:
    """HOST or HOST:PORT (IPv4 addresses and names)."""
    address, _, port = text.partition(":")
    return address, int(port) if port else 22


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--known-hosts", required=True)
    parser.add_argument("targets", nargs="+", metavar="HOST[:PORT]")
    args = parser.parse_args(argv)
    try:
        targets = [parse_target(t) for t in args.targets]
    except ValueError:
        print("floor: a target is HOST or HOST:PORT with a numeric port", file=sys.stderr)
        return 2
    results: dict[str, str] = {}

    def worker(address: str, port: int) -> None:
        label = f"{address}:{port}"
        try:
            status = run_one(address, port, args.user, args.key, args.known_hosts)
            results[label] = "ok" if status == 0 else f"exit {status}"
        except Exception as exc:  # noqa: BLE001 - reported per host, the process exit status says it failed
            results[label] = f"failed: {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=worker, args=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for label in sorted(results):
        print(f"{label} {results[label]}")
    return 0 if len(results) == len(targets) and all(v == "ok" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
