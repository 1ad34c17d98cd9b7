#!/usr/bin/env bash
# rapl_check.sh — can this host measure energy from RAPL (the powercap sysfs interface)?
#
# Lists every powercap zone with its name, socket, whether energy_uj is readable, its
# permissions and counter range, samples the counters once to show watts, and says what to
# change when something is missing. Reads only; needs no root (but reports what only root
# can see: since the fix for CVE-2020-8694, energy_uj is readable by root only).
#
# Exit status: 0 = energy counters found and readable; 1 = no RAPL zones; 2 = zones found but
# energy_uj not readable by this user; 64 = bad usage.
#
# Host roots can be moved for tests or for checking a copied tree:
#   KJ_SYSFS  (default /sys)   KJ_PROCFS (default /proc)   KJ_SLEEP (default sleep)
set -euo pipefail

SYSFS="${KJ_SYSFS:-/sys}"
PROCFS="${KJ_PROCFS:-/proc}"
SAMPLE_SECONDS=1
SLEEP_CMD="${KJ_SLEEP:-sleep}"

usage() {
    cat <<USAGE
usage: rapl_check.sh [--sample SECONDS] [--help]

  --sample SECONDS   sample the energy counters twice this far apart and print watts
                     (default 1; 0 skips sampling)

Environment: KJ_SYSFS (default /sys), KJ_PROCFS (default /proc) move the host roots;
KJ_SLEEP replaces sleep.
USAGE
}

while [ $# -gt 0 ]; do
    case "$1" in
        --sample)
            [ $# -ge 2 ] || { echo "rapl_check: --sample needs a value" >&2; exit 64; }
            SAMPLE_SECONDS="$2"; shift 2 ;;
        --sample=*) SAMPLE_SECONDS="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "rapl_check: unknown argument: $1" >&2; usage >&2; exit 64 ;;
    esac
done
if ! [[ "$SAMPLE_SECONDS" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "rapl_check: --sample must be a number of seconds, got '$SAMPLE_SECONDS'" >&2
    exit 64
fi

POWERCAP="$SYSFS/class/powercap"

cpu_vendor() {
    local vendor=""
    if [ -r "$PROCFS/cpuinfo" ]; then
        vendor="$(awk -F': *' '/^vendor_id/ {print $2; exit}' "$PROCFS/cpuinfo")"
    fi
    printf '%s' "${vendor:-unknown}"
}

module_loaded() {
    # /sys/module/<name> exists for loaded modules and for built-in ones.
    [ -d "$SYSFS/module/$1" ]
}

kernel_release() {
    if [ -r "$PROCFS/sys/kernel/osrelease" ]; then
        cat "$PROCFS/sys/kernel/osrelease"
    else
        echo "unknown"
    fi
}

# Owner and mode of a file, e.g. "root 0400"; "?" when stat cannot tell.
file_mode() {
    stat -L -c '%U %a' "$1" 2>/dev/null || echo "?"
}

read_first_line() {
    # Control characters in a value (a zone name) become '?': they would forge the table's
    # columns or drive the terminal.
    local value
    if value="$(head -n 1 "$1" 2>/dev/null)"; then
        printf '%s' "${value//[[:cntrl:]]/?}"
        return 0
    fi
    return 1
}

# Socket index of a zone: the N in intel-rapl:N (or intel-rapl-mmio:N), as the agent reports it.
zone_socket() {
    local base="${1##*/}" rest
    rest="${base#*:}"
    printf '%s' "${rest%%:*}"
}

VENDOR="$(cpu_vendor)"
echo "kubejoule RAPL check"
echo "  kernel:      $(kernel_release)"
echo "  cpu vendor:  $VENDOR"
echo "  running as:  uid $(id -u)"
echo "  sysfs root:  $SYSFS"

advice_no_zones() {
    echo
    echo "No RAPL zones under $POWERCAP."
    case "$VENDOR" in
        GenuineIntel)
            if ! module_loaded intel_rapl_msr && ! module_loaded intel_rapl_common; then
                echo "  The intel_rapl_msr driver is not loaded: run 'modprobe intel_rapl_msr' as root and"
                echo "  add it to /etc/modules-load.d/ so it loads at boot."
            else
                echo "  The RAPL driver is loaded but exposes no zone: the CPU may not support RAPL, or a"
                echo "  hypervisor hides the RAPL MSRs from this (virtual) machine."
            fi ;;
        AuthenticAMD)
            echo "  AMD CPUs (Zen, family 17h and later) expose their package energy through the same"
            echo "  intel_rapl_msr driver on recent kernels: load it with 'modprobe intel_rapl_msr'; if no"
            echo "  zone appears, the kernel is too old for this CPU (check 'dmesg | grep -i rapl')." ;;
        *)
            echo "  RAPL exists on Intel (Sandy Bridge and later) and AMD Zen CPUs only." ;;
    esac
    if [ ! -d "$SYSFS/class/powercap" ]; then
        echo "  $SYSFS/class/powercap does not exist: the kernel was built without CONFIG_POWERCAP,"
        echo "  or sysfs is not mounted at $SYSFS."
    fi
    echo "  In a virtual machine RAPL is usually not available: measure on the hypervisor host"
    echo "  (kvm_power_monitor.sh) or use a power profile (source=estimated)."
}

# Collect zones: every intel-rapl* entry of the powercap class (symlinks into devices/).
ZONES=()
if [ -d "$POWERCAP" ]; then
    for zone in "$POWERCAP"/intel-rapl*:*; do
        [ -e "$zone" ] || continue
        ZONES+=("$zone")
    done
fi
if [ ${#ZONES[@]} -eq 0 ]; then
    advice_no_zones
    exit 1
fi

# Names of the MSR zones, to flag their mmio duplicates (which the agent ignores).
declare -A MSR_NAMES=()
for zone in "${ZONES[@]}"; do
    case "${zone##*/}" in
        intel-rapl-mmio:*) ;;
        *) if name="$(read_first_line "$zone/name")"; then MSR_NAMES["$name"]=1; fi ;;
    esac
done

declare -A FIRST_UJ=()
declare -A MAX_UJ=()
unreadable=0
readable=0
has_psys=0
echo
printf '%-22s %-10s %-6s %-9s %-12s %-18s %s\n' ZONE NAME SOCKET READABLE MODE MAX_RANGE_UJ NOTE
for zone in "${ZONES[@]}"; do
    base="${zone##*/}"
    name="$(read_first_line "$zone/name" || echo '?')"
    socket="$(zone_socket "$zone")"
    note=""
    case "$base" in
        intel-rapl-mmio:*)
            if [ -n "${MSR_NAMES[$name]:-}" ]; then note="mmio duplicate of the MSR zone (ignored)"; fi ;;
    esac
    case "$name" in
        psys) has_psys=1; socket="-"; note="${note:-platform energy: used as node power}" ;;
        core|uncore) note="${note:-inside package: never added to it}" ;;
    esac
    if [ -e "$zone/energy_uj" ]; then
        mode="$(file_mode "$zone/energy_uj")"
        if uj="$(read_first_line "$zone/energy_uj")" && [[ "$uj" =~ ^[0-9]+$ ]]; then
            readable_flag=yes
            readable=$((readable + 1))
            FIRST_UJ["$zone"]="$uj"
        else
            readable_flag=no
            unreadable=$((unreadable + 1))
        fi
    else
        mode="-"
        readable_flag=missing
        note="${note:-no energy_uj file}"
    fi
    max_uj="$(read_first_line "$zone/max_energy_range_uj" || echo '?')"
    MAX_UJ["$zone"]="$max_uj"
    if [ "$readable_flag" = yes ] && { [ "$max_uj" = "?" ] || [ "$max_uj" = 0 ]; }; then
        note="${note:+$note; }no counter range: a wrap cannot be corrected"
    fi
    printf '%-22s %-10s %-6s %-9s %-12s %-18s %s\n' \
        "$base" "$name" "$socket" "$readable_flag" "${mode// /:}" "$max_uj" "$note"
done

echo
if [ "$has_psys" = 1 ]; then
    echo "Node power source: psys (platform) zone."
else
    echo "Node power source: sum over packages of package + dram (no psys zone)."
fi

if [ "$unreadable" -gt 0 ]; then
    echo
    echo "energy_uj is not readable by uid $(id -u) in $unreadable zone(s)."
    echo "  Since the fix for CVE-2020-8694 (Platypus) the kernel makes energy_uj readable by root"
    echo "  only. The kubejoule agent runs as root in its DaemonSet for this reason; on a host, run"
    echo "  this check and the tools as root (sudo asks for your own password; never store one in a"
    echo "  script). Making the files world-readable again (a udev rule or chmod) re-opens the"
    echo "  side channel that the fix closed: do it only on machines you do not share."
    exit 2
fi

if [ "$SAMPLE_SECONDS" != 0 ] && [ "$readable" -gt 0 ]; then
    "$SLEEP_CMD" "$SAMPLE_SECONDS"
    echo
    echo "Power over ${SAMPLE_SECONDS} s:"
    for zone in "${ZONES[@]}"; do
        first="${FIRST_UJ[$zone]:-}"
        [ -n "$first" ] || continue
        name="$(read_first_line "$zone/name" || echo '?')"
        second="$(read_first_line "$zone/energy_uj" || echo '')"
        max_uj="${MAX_UJ[$zone]}"
        if ! [[ "$second" =~ ^[0-9]+$ ]]; then
            printf '  %-22s %-10s unreadable on the second read\n' "${zone##*/}" "$name"
            continue
        fi
        if [ "$second" -ge "$first" ]; then
            delta=$((second - first))
        elif [[ "$max_uj" =~ ^[1-9][0-9]*$ ]]; then
            delta=$((second + max_uj - first))
        else
            printf '  %-22s %-10s counter fell and no range to correct it: gap\n' "${zone##*/}" "$name"
            continue
        fi
        awk -v z="${zone##*/}" -v n="$name" -v d="$delta" -v s="$SAMPLE_SECONDS" \
            'BEGIN { printf "  %-22s %-10s %10.3f W\n", z, n, d / 1e6 / s }'
    done
fi

echo
echo "OK: RAPL energy counters are readable."
exit 0
