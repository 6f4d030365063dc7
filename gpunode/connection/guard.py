"""Every remote command runs in its own session, recorded next to the run lock, and dies with its SSH channel.

The wrapper (`guarded`) starts the command with `setsid` (its own session and process group), feeds it exactly
the stdin bytes the controller sent, records `<pid>: since, step, command` in the guard folder next to the lock
(`/run/lock/gpunode.lock.d/`), and watches the channel: the controller keeps the channel's input open until the
command ends, so end of input before that means the channel closed (Ctrl-C, a timeout, the controller killed,
sshd's session gone). Then the command's whole session is stopped (TERM, then KILL), except a package transaction
(dpkg, rpm, apt, dnf, yum...): that is never killed; it runs to its end, and the run lock waits for it
(`gpunode/runner/remote_lock.py` sweeps the records when it lets go and refuses new runs while one lives).
"""

from __future__ import annotations

from gpunode.connection.quoting import join

# Processes whose presence in a session makes it a package transaction (never killed mid-way).
PACKAGE_COMMANDS = "dpkg apt apt-get aptitude unattended-upgr rpm dnf dnf-3 yum microdnf tdnf zypper"

# POSIX sh functions shared by the wrapper and the lock holder. `gd` is the guard folder.
FUNCTIONS = f"""d=/run/lock; [ -d "$d" ] && [ -w "$d" ] || d=${{TMPDIR:-/tmp}}; gd=$d/gpunode.lock.d
_gn_alive() {{ read -r _l <"/proc/$1/stat" 2>/dev/null || return 1; _r=${{_l##*) }}; [ "${{_r%% *}}" != Z ]; }}
_gn_members() {{ for _s in /proc/[0-9]*/stat; do read -r _l <"$_s" 2>/dev/null || continue
  _r=${{_l##*) }}; set -- $_r; [ "$4" = "$_sid" ] || continue
  _c=${{_l#*\\(}}; _p=${{_s#/proc/}}; printf '%s %s\\n' "${{_p%/stat}}" "${{_c%)*}}"; done; }}
_gn_pkg() {{ _sid=$1; _gn_members | while read -r _p _c; do case " {PACKAGE_COMMANDS} " in
  *" $_c "*) echo "$_c";; esac; done | grep -q .; }}
_gn_kill() {{ _sid=$1; kill -s "$2" -- "-$1" 2>/dev/null; _gn_members | while read -r _p _c; do
  kill -s "$2" "$_p" 2>/dev/null; done; }}
_gn_stop() {{ _gn_alive "$1" || return 0; if _gn_pkg "$1"; then return 1; fi
  _gn_kill "$1" TERM; _i=0; while _gn_alive "$1" && [ $_i -lt 50 ]; do sleep 0.1; _i=$((_i+1)); done
  _gn_alive "$1" && _gn_kill "$1" KILL; return 0; }}
"""

# A hidden (sensitive) command reaches its shell through a pipe and runs there by `eval`: no argv or environment
# on the host holds it (the shell's own argv is the constant below); its input comes on fd 4.
WRAPPER = FUNCTIONS + r"""n=$1; step=$2; show=$3; cmd=$4; hid=$5; exec 3<&0 </dev/null
[ -n "$hid" ] && cmd=$(head -c "$hid" <&3); [ -n "$show" ] || show=$cmd
[ -d "$gd" ] || mkdir -m 755 "$gd" 2>/dev/null; t=$gd; [ -w "$t" ] || t=${TMPDIR:-/tmp}
i=/dev/null; if [ "$n" -gt 0 ]; then f=$t/in.$$; rm -f "$f"; mkfifo -m 600 "$f" || exit 125; i=$f; fi
if [ -n "$hid" ]; then
  printf '%s' "$cmd" | setsid sh -c 'c=$(cat); exec 0<&4 4<&-; eval "$c"' gpunode-hidden 4<"$i" 3<&- & p=$!
else
  setsid sh -c "$cmd" <"$i" 3<&- & p=$!
fi
[ "$n" -gt 0 ] && { head -c "$n" <&3 >"$f"; rm -f "$f"; }
[ -w "$gd" ] && printf '%s\t%s\t%s\n' "$(date +%s)" "$step" "$(printf '%s' "$show" | tr '\n\t' '  ' | cut -c1-300)" \
  >"$gd/$p" 2>/dev/null
( trap '' PIPE; cat <&3 >/dev/null; _gn_stop "$p" ) >/dev/null 2>&1 & w=$!
wait "$p"; c=$?
rm -f "$gd/$p"; kill "$w" 2>/dev/null
exit $c
"""


def guarded(command: str, stdin_bytes: int, step: str, hidden: bool = False) -> tuple[str, bytes]:
    """`command` under the wrapper, and bytes to send before the command's own input (exactly `stdin_bytes`,
    with the input kept open). A hidden (sensitive) command travels on stdin, never on a command line that
    `ps` or sudo's log would show, and the host's record says only that it is hidden."""
    if hidden:
        body = command.encode()
        return join(["sh", "-c", WRAPPER, "gpunode-step", str(stdin_bytes), step or "-",
                     "(hidden: sensitive step)", "", str(len(body))]), body
    return join(["sh", "-c", WRAPPER, "gpunode-step", str(stdin_bytes), step or "-", "", command]), b""
