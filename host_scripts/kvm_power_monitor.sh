#!/usr/bin/env bash
# kvm_power_monitor.sh — power of qemu/KVM virtual machines on a host without the kubejoule agent.
#
# Every interval it reads the node's RAPL energy counters (powercap sysfs), the CPU time of the
# whole host (/proc/stat) and of each qemu process (/proc/<pid>/stat), and gives each VM its
# share of the node's active energy, the way the agent attributes pods (DESIGN.md):
#   busy  B = user + nice + system + irq + softirq ticks; not busy: idle + iowait (steal excluded)
#   idle energy = node energy x (1 - B / (B + idle + iowait)), or --idle-watts x elapsed
#   VM energy   = (node energy - idle energy) x VM ticks / B
# Node energy = the psys zone when present, else the sum over packages of package + dram
# (core and uncore are inside package; intel-rapl-mmio duplicates of MSR zones are ignored).
# A counter that fell is corrected with max_energy_range_uj (one wrap); with no usable range
# the interval is a gap: printed as NA, never as 0, and not added to the totals.
#
# Output: tab-separated lines, one per VM per interval, watts and joules (plus a kWh total).
# Needs root: energy_uj is readable by root only (CVE-2020-8694). No password is stored here.
#
# Environment (for tests and copied trees): KJ_SYSFS (default /sys), KJ_PROCFS (default /proc),
# KJ_SLEEP (command that waits one interval; default sleep).
set -euo pipefail

SYSFS="${KJ_SYSFS:-/sys}"
PROCFS="${KJ_PROCFS:-/proc}"
SLEEP_CMD="${KJ_SLEEP:-sleep}"
INTERVAL_SECONDS=5
DURATION_SECONDS=0
IDLE_WATTS=""
VM_FILTER=""
PID_FILTER=""

usage() {
    cat <<USAGE
usage: kvm_power_monitor.sh [--interval SECONDS] [--duration SECONDS] [--vm NAME] [--pid PID]
                            [--idle-watts WATTS] [--help]

  --interval SECONDS   time between samples (default 5)
  --duration SECONDS   stop after this long and print totals (default 0: until Ctrl-C)
  --vm NAME            only this VM (its qemu -name)
  --pid PID            only this qemu process
  --idle-watts WATTS   the node's calibrated idle power; without it idle power is
                       node power x (1 - CPU utilization)

Columns: time_s node_watts vm pid cpu_seconds vm_watts vm_joules_total
Environment: KJ_SYSFS, KJ_PROCFS move the host roots; KJ_SLEEP replaces sleep.
USAGE
}

die_usage() {
    echo "kvm_power_monitor: $1" >&2
    exit 64
}

is_number() {
    [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]]
}

while [ $# -gt 0 ]; do
    case "$1" in
        --interval|--duration|--vm|--pid|--idle-watts)
            [ $# -ge 2 ] || die_usage "$1 needs a value"
            opt="$1"; value="$2"; shift 2 ;;
        --interval=*|--duration=*|--vm=*|--pid=*|--idle-watts=*)
            opt="${1%%=*}"; value="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "kvm_power_monitor: unknown argument: $1" >&2; usage >&2; exit 64 ;;
    esac
    case "$opt" in
        --interval) is_number "$value" || die_usage "--interval must be seconds, got '$value'"
                    INTERVAL_SECONDS="$value" ;;
        --duration) is_number "$value" || die_usage "--duration must be seconds, got '$value'"
                    DURATION_SECONDS="$value" ;;
        --vm) VM_FILTER="$value" ;;
        --pid) [[ "$value" =~ ^[0-9]+$ ]] || die_usage "--pid must be a process id, got '$value'"
               PID_FILTER="$value" ;;
        --idle-watts) is_number "$value" || die_usage "--idle-watts must be watts, got '$value'"
                      IDLE_WATTS="$value" ;;
    esac
done
if awk -v s="$INTERVAL_SECONDS" 'BEGIN { exit !(s <= 0) }'; then
    die_usage "--interval must be more than 0"
fi

if [ "$(id -u)" -ne 0 ]; then
    cat >&2 <<MSG
kvm_power_monitor: must run as root.
  The RAPL energy counters (energy_uj under $SYSFS/class/powercap) are readable by root only
  since the kernel's fix for CVE-2020-8694. Run it with sudo (which asks for your own
  password) or from a root shell. Check the counters first with rapl_check.sh.
MSG
    exit 77
fi

# ---------------------------------------------------------------- node energy zones
POWERCAP="$SYSFS/class/powercap"
declare -a NODE_ZONES=()
NODE_SOURCE=""

read_name() {
    local name=""
    read -r name < "$1/name" 2>/dev/null || true
    printf '%s' "$name"
}

select_zones() {
    local zone name
    declare -A msr_names=()
    declare -a candidates=() psys=()
    for zone in "$POWERCAP"/intel-rapl:*; do
        [ -e "$zone" ] || continue
        msr_names["$(read_name "$zone")"]=1
        candidates+=("$zone")
    done
    for zone in "$POWERCAP"/intel-rapl-mmio:*; do
        [ -e "$zone" ] || continue
        name="$(read_name "$zone")"
        if [ -n "${msr_names[$name]:-}" ]; then continue; fi
        candidates+=("$zone")
    done
    for zone in ${candidates[@]+"${candidates[@]}"}; do
        if [ "$(read_name "$zone")" = psys ]; then psys+=("$zone"); fi
    done
    if [ ${#psys[@]} -gt 0 ]; then
        NODE_ZONES=("${psys[@]}")
        NODE_SOURCE="psys"
        return
    fi
    for zone in ${candidates[@]+"${candidates[@]}"}; do
        case "$(read_name "$zone")" in
            package*|dram) NODE_ZONES+=("$zone") ;;
            *) ;;  # core and uncore are inside package: never added to it
        esac
    done
    NODE_SOURCE="package+dram"
}

select_zones
if [ ${#NODE_ZONES[@]} -eq 0 ]; then
    echo "kvm_power_monitor: no RAPL zones under $POWERCAP; run rapl_check.sh for advice." >&2
    exit 1
fi

declare -A ZONE_MAX_UJ=()
for zone in "${NODE_ZONES[@]}"; do
    max_uj=0
    read -r max_uj < "$zone/max_energy_range_uj" 2>/dev/null || max_uj=0
    [[ "$max_uj" =~ ^[0-9]+$ ]] || max_uj=0
    ZONE_MAX_UJ["$zone"]="$max_uj"
    if ! read -r _ < "$zone/energy_uj" 2>/dev/null; then
        echo "kvm_power_monitor: cannot read $zone/energy_uj; run rapl_check.sh for advice." >&2
        exit 2
    fi
done

CLK_TCK="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# ---------------------------------------------------------------- one sample
declare -A CUR_UJ=() PREV_UJ=()
declare -A CUR_TICKS=() PREV_TICKS=() VM_NAME=() VM_JOULES=()
CUR_BUSY=0; CUR_NOTBUSY=0; PREV_BUSY=0; PREV_NOTBUSY=0
CUR_TIME=""; PREV_TIME=""

read_clock() {
    # /proc/uptime is seconds since boot, a monotonic clock; 10 ms resolution is plenty for
    # intervals of a second or more.
    local up _rest
    if read -r up _rest < "$PROCFS/uptime" 2>/dev/null && is_number "$up"; then
        CUR_TIME="$up"
    else
        CUR_TIME="${EPOCHREALTIME:-$(date +%s.%N)}"
    fi
}

read_cpu_stat() {
    local label user nice system idle iowait irq softirq _rest
    read -r label user nice system idle iowait irq softirq _rest < "$PROCFS/stat"
    [ "$label" = cpu ] || { echo "kvm_power_monitor: unexpected $PROCFS/stat" >&2; exit 1; }
    CUR_BUSY=$((user + nice + system + irq + softirq))
    CUR_NOTBUSY=$((idle + iowait))
}

printable() {
    # Control characters (tabs, newlines, escape sequences) in a name would forge rows and
    # columns of the output or drive the terminal: each becomes '?'.
    local value="$1"
    printf '%s' "${value//[[:cntrl:]]/?}"
}

vm_name_of() {
    # The guest name from "-name guest=NAME,..." or "-name NAME,..."; never the command line.
    local pid="$1" i arg value
    local -a args=()
    mapfile -d '' -t args < "$PROCFS/$pid/cmdline" 2>/dev/null || true
    for ((i = 0; i < ${#args[@]}; i++)); do
        arg="${args[$i]}"
        if [ "$arg" = "-name" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
            value="${args[$((i + 1))]}"
            value="${value#guest=}"
            printable "${value%%,*}"
            return
        fi
    done
    printf 'pid-%s' "$pid"
}

read_vms() {
    local dir pid comm stat rest
    local -a fields
    CUR_TICKS=()
    for dir in "$PROCFS"/[0-9]*; do
        pid="${dir##*/}"
        if [ -n "$PID_FILTER" ] && [ "$pid" != "$PID_FILTER" ]; then continue; fi
        comm=""
        read -r comm < "$dir/comm" 2>/dev/null || continue  # the process may have exited
        case "$comm" in
            qemu-system-*|qemu-kvm) ;;
            *) continue ;;
        esac
        stat=""
        read -r stat < "$dir/stat" 2>/dev/null || continue
        rest="${stat##*) }"            # comm may hold spaces and parentheses
        read -r -a fields <<< "$rest"  # fields[0] is state; utime, stime are fields[11], [12]
        [ ${#fields[@]} -ge 13 ] || continue
        if [ -z "${VM_NAME[$pid]:-}" ]; then
            VM_NAME["$pid"]="$(vm_name_of "$pid")"
        fi
        if [ -n "$VM_FILTER" ] && [ "${VM_NAME[$pid]}" != "$VM_FILTER" ]; then continue; fi
        CUR_TICKS["$pid"]=$((fields[11] + fields[12]))
    done
}

read_energy() {
    local zone uj
    for zone in "${NODE_ZONES[@]}"; do
        uj=""
        read -r uj < "$zone/energy_uj" 2>/dev/null || uj=""
        [[ "$uj" =~ ^[0-9]+$ ]] || uj=""
        CUR_UJ["$zone"]="$uj"
    done
}

sample() {
    read_clock
    read_cpu_stat
    read_energy
    read_vms
}

remember() {
    local key
    PREV_TIME="$CUR_TIME"; PREV_BUSY="$CUR_BUSY"; PREV_NOTBUSY="$CUR_NOTBUSY"
    PREV_UJ=()
    for key in "${!CUR_UJ[@]}"; do PREV_UJ["$key"]="${CUR_UJ[$key]}"; done
    PREV_TICKS=()
    for key in "${!CUR_TICKS[@]}"; do PREV_TICKS["$key"]="${CUR_TICKS[$key]}"; done
}

# Node energy over the interval in microjoules, or "" for a gap (unreadable, or a counter that
# fell with no range to correct it).
node_delta_uj() {
    local zone cur prev max total=0
    for zone in "${NODE_ZONES[@]}"; do
        cur="${CUR_UJ[$zone]}"; prev="${PREV_UJ[$zone]:-}"; max="${ZONE_MAX_UJ[$zone]}"
        if [ -z "$cur" ] || [ -z "$prev" ]; then
            echo ""; return
        fi
        if [ "$cur" -ge "$prev" ]; then
            total=$((total + cur - prev))
        elif [ "$max" -gt 0 ] && [ "$prev" -le "$max" ]; then
            total=$((total + cur + max - prev))
        else
            echo ""; return
        fi
    done
    echo "$total"
}

# ---------------------------------------------------------------- report
START_TIME=""

# One interval: a line per VM (or one node line when there is none). The arithmetic runs in
# awk (bash has no floating point); awk also returns each VM's new running total of joules.
print_interval() {
    local delta_uj busy notbusy pid vm_rows="" sum_ticks=0 ticks line kind a b
    local -a results=()
    delta_uj="$(node_delta_uj)"
    busy=$((CUR_BUSY - PREV_BUSY))
    notbusy=$((CUR_NOTBUSY - PREV_NOTBUSY))
    for pid in "${!CUR_TICKS[@]}"; do
        [ -n "${PREV_TICKS[$pid]:-}" ] || continue  # a new VM is counted from its second sample
        ticks=$((CUR_TICKS[$pid] - PREV_TICKS[$pid]))
        vm_rows+="$pid"$'\t'"${VM_NAME[$pid]}"$'\t'"$ticks"$'\t'"${VM_JOULES[$pid]:-0}"$'\n'
        sum_ticks=$((sum_ticks + ticks))
    done
    mapfile -t results < <(awk -F'\t' \
        -v delta_uj="$delta_uj" -v busy="$busy" -v notbusy="$notbusy" \
        -v now="$CUR_TIME" -v prev="$PREV_TIME" -v start="$START_TIME" \
        -v interval="$INTERVAL_SECONDS" -v idle_watts="$IDLE_WATTS" \
        -v sum_ticks="$sum_ticks" -v tck="$CLK_TCK" '
        BEGIN {
            elapsed = now - prev
            if (elapsed <= 0) elapsed = interval
            t = sprintf("%.2f", now - start)
            gap = (delta_uj == "")
            node_w = "NA"
            if (!gap) {
                node_j = delta_uj / 1e6
                if (idle_watts != "") {
                    idle_j = idle_watts * elapsed
                    if (idle_j > node_j) idle_j = node_j
                } else {
                    total = busy + notbusy
                    idle_j = (total > 0) ? node_j * notbusy / total : node_j
                }
                active_j = node_j - idle_j
                node_w = sprintf("%.3f", node_j / elapsed)
            }
            # Read skew can make the VMs add up to more than the busy time: scale them to fit.
            divisor = (sum_ticks > busy) ? sum_ticks : busy
            rows = 0
        }
        NF >= 4 {
            rows++
            pid = $1; name = $2; ticks = $3; before = $4
            if (gap) {
                printf "ROW\t%s\t%s\t%s\t%s\t%.2f\tNA\t%.3f\n", t, node_w, name, pid, ticks / tck, before
                next
            }
            vm_j = (divisor > 0) ? active_j * ticks / divisor : 0
            printf "ROW\t%s\t%s\t%s\t%s\t%.2f\t%.3f\t%.3f\n", t, node_w, name, pid, ticks / tck, vm_j / elapsed, before + vm_j
            printf "TOTAL\t%s\t%.6f\n", pid, before + vm_j
        }
        END {
            if (rows == 0) printf "ROW\t%s\t%s\t-\t-\t-\t-\t-\n", t, node_w
        }' <<< "$vm_rows")
    for line in ${results[@]+"${results[@]}"}; do
        IFS=$'\t' read -r kind a b _ <<< "$line"
        if [ "$kind" = TOTAL ]; then
            VM_JOULES["$a"]="$b"
        else
            printf '%s\n' "${line#ROW$'\t'}"
        fi
    done
}

print_totals() {
    local pid
    for pid in "${!VM_JOULES[@]}"; do
        awk -v name="${VM_NAME[$pid]}" -v pid="$pid" -v j="${VM_JOULES[$pid]}" \
            'BEGIN { printf "# total\tvm=%s\tpid=%s\tjoules=%.3f\tkwh=%.9f\n", name, pid, j, j / 3.6e6 }'
    done
}

# A signal only raises a flag: the loop finishes the interval it is in (so a total never
# misses half an interval's VMs) and then prints the totals.
STOP=0
on_signal() {
    STOP=1
}

# ---------------------------------------------------------------- main loop
idle_note="node power x (1 - utilization)"
if [ -n "$IDLE_WATTS" ]; then idle_note="calibrated ${IDLE_WATTS} W"; fi
echo "# kubejoule kvm_power_monitor: node power from $NODE_SOURCE (${#NODE_ZONES[@]} zone(s)), interval ${INTERVAL_SECONDS} s, idle = $idle_note"
printf 'time_s\tnode_watts\tvm\tpid\tcpu_seconds\tvm_watts\tvm_joules_total\n'

trap on_signal INT TERM
sample
START_TIME="$CUR_TIME"
remember

if awk -v d="$DURATION_SECONDS" 'BEGIN { exit !(d > 0) }'; then
    intervals="$(awk -v d="$DURATION_SECONDS" -v i="$INTERVAL_SECONDS" \
        'BEGIN { n = d / i; c = int(n); if (c < n) c++; print c }')"
else
    intervals=-1
fi

done_intervals=0
while [ "$STOP" = 0 ] && { [ "$intervals" -lt 0 ] || [ "$done_intervals" -lt "$intervals" ]; }; do
    # The wait runs in the background so that a signal ends the wait at once. A foreground
    # sleep is not enough: bash drops a SIGINT that arrives while a foreground command is
    # exiting normally (its "wait and cooperative exit" rule), so a Ctrl-C could be lost.
    "$SLEEP_CMD" "$INTERVAL_SECONDS" &
    sleeper=$!
    if wait "$sleeper"; then sleep_status=0; else sleep_status=$?; fi
    if [ "$STOP" != 0 ]; then
        kill "$sleeper" 2>/dev/null || true
        wait "$sleeper" 2>/dev/null || true
        break
    fi
    if [ "$sleep_status" != 0 ]; then
        echo "kvm_power_monitor: '$SLEEP_CMD $INTERVAL_SECONDS' failed" >&2
        exit 1
    fi
    sample
    print_interval
    remember
    done_intervals=$((done_intervals + 1))
done
print_totals
