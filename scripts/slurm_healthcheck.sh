#!/bin/sh
# gpunode's Slurm HealthCheckProgram: the quick acceptance tier, acted on. Installed as
# /usr/local/libexec/gpunode/slurm-healthcheck; slurm.conf lines: gpunode.schedulers.slurm_conf.healthcheck_lines.
#
#   slurm-healthcheck [--accept PROGRAM]
#
# Runs `PROGRAM --tier quick --format slurm` (default /usr/local/libexec/gpunode/accept, or $GPUNODE_ACCEPT), which
# prints one line (the first failing finding) and exits 0 pass, 1 fail, 2 could not judge.
#   fail (1):  drain this node with reason "gpunode: <line>", unless it is already drained or down for a reason
#              that is not gpunode's (an admin's drain keeps its reason).
#   pass (0):  resume this node only if gpunode's health check drained it (reason starts "gpunode:" but not
#              "gpunode: change:", a rolling change's drain), never an admin's drain.
#   2, or anything else (killed, missing program, timed out): nothing changes. The program could not judge the
#              node (no GPU driver answer, a tool missing, its own budget spent); draining a fleet on "don't
#              know" would take good nodes out on a broken check. The line is printed for slurmd's log.
# Exits with the program's code, so slurmd logs a miss ("health_check failed: rc:1 output:...").
#
# Slurm 22.05 runs the program as root with an environment holding only SLURMD_NODENAME
# (SchedMD/slurm@d525b6872a106d32916b33a8738f12510ec7cf04 src/slurmd/slurmd/slurmd.c:2860-2880: env_array_create,
# then setenvf SLURMD_NODENAME), so PATH is set here. The node is named as slurmd names it; run by hand, the kernel's
# hostname, read the way LBNL NHC reads it (mej/nhc@9c4a38c0c9f48f92005c9120ca88145c33841dac nhc:236-241).
# Reading and changing the node follows NHC's helpers (helpers/node-mark-offline:56-88 and node-mark-online:55-84
# at the same commit): `sinfo -o '%t %E' -hn NODE` for state and reason, `scontrol update` to act, and the
# scontrol/sinfo commands can be replaced like NHC's $SLURM_SCONTROL/$SLURM_SINFO.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
LEADER="gpunode:"
ACCEPT="${GPUNODE_ACCEPT:-/usr/local/libexec/gpunode/accept}"
SCONTROL="${SLURM_SCONTROL:-scontrol}"
SINFO="${SLURM_SINFO:-sinfo}"
# slurmd kills the program after 60 s (slurm.conf(5) HealthCheckProgram; slurmd.c:2870): stop the check first so
# that this script still decides (and says) something.
BUDGET="${GPUNODE_ACCEPT_TIMEOUT:-50}"

while [ $# -gt 0 ]; do
    case "$1" in
        --accept) ACCEPT="$2"; shift 2 ;;
        --accept=*) ACCEPT="${1#--accept=}"; shift ;;
        *) echo "slurm-healthcheck: unknown argument '$1' (usage: slurm-healthcheck [--accept PROGRAM])" >&2
           exit 2 ;;
    esac
done

NODE="${SLURMD_NODENAME:-}"
if [ -z "$NODE" ]; then
    if [ -r /proc/sys/kernel/hostname ]; then read -r NODE < /proc/sys/kernel/hostname; else NODE=$(hostname); fi
fi

say() { echo "slurm-healthcheck[$NODE]: $*"; }
# scontrol's update failed (127: no scontrol here, so no Slurm client on this host): say so, the node is unchanged
unchanged() {
    say "could not $1 the node: \`$SCONTROL update\` failed (exit $2); the node is unchanged. Check that this host is a" \
        "Slurm node with Slurm's client installed and that slurmctld answers (\`$SCONTROL ping\`)"
}

# State (compact, e.g. idle, drain, drng, down*) and reason ("none" when none: src/sinfo/print.c _print_reason).
node_status() {
    "$SINFO" -h -N -n "$NODE" -o '%t %E' 2>/dev/null | head -n 1
}

if [ ! -x "$ACCEPT" ]; then
    say "could not judge: $ACCEPT is not installed or not executable; node state unchanged"
    exit 2
fi
# The program's own exit code matters (a pipeline's would be head's): its output goes through a file.
OUT=$(mktemp) || exit 2
timeout -k 5 "$BUDGET" "$ACCEPT" --tier quick --format slurm >"$OUT" 2>/dev/null
RC=$?
# One line for scontrol's Reason=: tabs to spaces; control characters and '"' dropped (scontrol strips a leading
# and trailing quote, src/scontrol/update_node.c:167-179); no edge spaces.
LINE=$(head -n 1 "$OUT" | tr '\t' ' ' | tr -d '\000-\037\177"' | sed 's/^ *//; s/ *$//')
rm -f "$OUT"

STATUS=$(node_status)
STATE=${STATUS%% *}
REASON=${STATUS#* }
case "$STATE" in
    down*|drain*|drng*|fail*|maint*) OFFLINE=1 ;;
    *) OFFLINE=0 ;;
esac
# A drain for a change in progress (gpunode.schedulers.slurm.CHANGE_REASON) is gpunode's too, but only the change's
# own gate lifts it: a pass here must not return a node in the middle of its driver change.
case "$REASON" in
    "$LEADER change:"*) OURS=0 ;;
    "$LEADER"*) OURS=1 ;;
    *) OURS=0 ;;
esac

case "$RC" in
    0)
        if [ "$OFFLINE" = 1 ] && [ "$OURS" = 1 ]; then
            say "pass; resuming (drained by gpunode: $REASON)"
            "$SCONTROL" update NodeName="$NODE" State=RESUME || unchanged "resume" $?
        elif [ "$OFFLINE" = 1 ]; then
            say "pass; node stays $STATE: not drained by gpunode ($REASON)"
        else
            say "pass"
        fi
        ;;
    1)
        [ -n "$LINE" ] || LINE="quick acceptance tier failed (no finding printed)"
        if [ "$OFFLINE" = 1 ] && [ "$OURS" = 0 ]; then
            say "fail: $LINE; node already offline ($STATE) for another reason ($REASON): left as it is"
        else
            say "fail: $LINE; draining"
            "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="$LEADER $LINE" || unchanged "drain" $?
        fi
        ;;
    *)
        say "could not judge (exit $RC): ${LINE:-no output}; node state unchanged"
        ;;
esac
exit "$RC"
