#!/usr/bin/env bash
# Soak benchmark (not run by CI): a long campaign with every process's resident memory and open file
# descriptors sampled at a fixed interval. Prints one line per sample (minute, total RSS, the largest
# worker per backend, fds) and writes every process's sample to OUT/soak.csv.
#
#   bench/soak.sh [--time 1h] [--every 60] [--out DIR] [-- extra quorum fuzz flags]
#   e.g. bench/soak.sh --time 1h -- --backends torch,onednn,opencv,armnn,xnnpack --mode both --jobs 2
#
# QUORUM (default ./build/quorum) is the binary. The campaign directory is OUT/campaign (removed first).
set -euo pipefail
time_budget=1h every=60 out=/tmp/quorum-soak
quorum=${QUORUM:-./build/quorum}
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_budget=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "soak: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$quorum" ] || { echo "soak: no quorum binary at $quorum (set QUORUM=...)" >&2; exit 2; }
[ $# -gt 0 ] || set -- --backends torch,onednn,opencv,armnn,xnnpack --mode both --jobs 2
mkdir -p "$out"
rm -rf "$out/campaign"
"$quorum" fuzz --time "$time_budget" --out "$out/campaign" "$@" >"$out/campaign.log" 2>&1 &
root=$!
echo "soak: quorum fuzz pid $root, sampling every ${every}s into $out/soak.csv (log: $out/campaign.log)"
echo "elapsed_s,pid,name,rss_kb,fds" >"$out/soak.csv"

tree() {  # the pid and all its descendants
  local p=$1
  echo "$p"
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do tree "$c"; done
}

start=$(date +%s)
printf '%8s %10s %s\n' elapsed total_MB "largest process per name (MB) | open fds total"
while kill -0 "$root" 2>/dev/null; do
  now=$(( $(date +%s) - start ))
  total=0 fds=0
  declare -A best=()
  for p in $(tree "$root"); do
    [ -r /proc/"$p"/status ] || continue
    name=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -n 1 || true)
    name=${name##*/} name=${name:-?}
    rss=$(awk '/^VmRSS:/{print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
    [ -n "$rss" ] || rss=0
    n=$(ls /proc/"$p"/fd 2>/dev/null | wc -l)
    echo "$now,$p,$name,$rss,$n" >>"$out/soak.csv"
    total=$((total + rss)) fds=$((fds + n))
    [ "${best[$name]:-0}" -ge "$rss" ] || best[$name]=$rss
  done
  line=""
  for k in "${!best[@]}"; do line+=" $k=$(( best[$k] / 1024 ))"; done
  printf '%8s %10s %s | %s\n' "${now}s" "$((total / 1024))" "$line" "$fds"
  unset best
  sleep "$every"
done
wait "$root" || true
tail -n 5 "$out/campaign.log"
