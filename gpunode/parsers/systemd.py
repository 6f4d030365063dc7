"""`systemctl show` output: one unit's properties (`-p A -p B -- UNIT`) or several units' (blank-line separated)."""

from __future__ import annotations

from dataclasses import dataclass

# UnitFileState values meaning "starts at boot, or is pulled in by what does" (systemctl(1), is-enabled's table)
ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "static", "alias", "indirect"})
RUNNING_STATES = frozenset({"active", "activating", "reloading"})


@dataclass(frozen=True)
class UnitState:
    """A unit's state as `systemctl show` printed it; a property systemctl did not print is None."""

    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    unit_file_state: str | None = None
    need_daemon_reload: bool = False

    @property
    def not_found(self) -> bool:
        """No unit file of that name (systemctl still prints the properties, LoadState=not-found)."""
        return self.load_state == "not-found"

    @property
    def auto_restart(self) -> bool:
        """Dying and being restarted by systemd (ActiveState=activating, SubState=auto-restart): not running."""
        return self.sub_state == "auto-restart"

    @property
    def running(self) -> bool:
        """Active, starting or reloading, and not between crashes."""
        return self.active_state in RUNNING_STATES and not self.auto_restart

    @property
    def enabled(self) -> bool:
        """Enabled or static/indirect (nothing to enable)."""
        return self.unit_file_state in ENABLED_STATES


def parse_properties(text: str | None) -> dict[str, str]:
    """KEY=VALUE lines of `systemctl show` (other lines, such as warnings on stderr, are skipped)."""
    return dict(line.split("=", 1) for line in (text or "").splitlines() if "=" in line)


def parse_unit(text: str | None) -> UnitState:
    """One unit's state from `systemctl show -p LoadState -p ActiveState -p SubState -p UnitFileState
    -p NeedDaemonReload -- UNIT`."""
    props = parse_properties(text)
    return UnitState(
        load_state=props.get("LoadState"),
        active_state=props.get("ActiveState"),
        sub_state=props.get("SubState"),
        unit_file_state=props.get("UnitFileState"),
        need_daemon_reload=props.get("NeedDaemonReload") == "yes",
    )


def parse_units(text: str | None) -> dict[str, dict[str, str]]:
    """Unit Id -> properties from `systemctl show -p Id,... UNIT...` (blank-line separated)."""
    units: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in [*(text or "").splitlines(), ""]:
        if not line.strip():
            if current.get("Id"):
                units[current["Id"]] = current
            current = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            current[key] = value
    return units


def parse_is_enabled(text: str | None) -> str:
    """The state `systemctl is-enabled UNIT 2>/dev/null` printed: enabled, static, alias, disabled, masked...; "" for
    a unit that does not exist (systemctl then prints only to stderr)."""
    return (text or "").strip()
