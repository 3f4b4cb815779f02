#!/usr/bin/env bash
# Runs Quorum's own libFuzzer harnesses (fuzz/<name>_fuzz.cpp), each for TIME (30s, 10m, 1h), on
# a scratch copy of its seed corpus (fuzz/corpus/<name>/ is never written), at most PARALLEL at
# once. Prints one result line per harness: crashes (0 or the reproducing input), runs executed,
# cov (edges covered) and ft (features). Exits 1 if any harness crashed, timed out or ran out of
# memory; a crashing input is kept under OUT/<name>/ (OUT defaults to BIN_DIR/../fuzz-self-out).
#
#   fuzz/run.sh BIN_DIR TIME [PARALLEL] NAME...
set -uo pipefail
bin_dir=$1 time=$2 parallel=${3:-1}
shift 3
src_dir=$(cd "$(dirname "$0")" && pwd)
out_dir=${FUZZ_SELF_OUT:-$bin_dir/../fuzz-self-out}

case $time in
  *h) secs=$((${time%h} * 3600)) ;;
  *m) secs=$((${time%m} * 60)) ;;
  *s) secs=${time%s} ;;
  *) secs=$time ;;
esac

run_one() {
  local name=$1 exe=$bin_dir/${1}_fuzz
  local dir=$out_dir/$name
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  cp "$src_dir/corpus/$name"/* "$dir/corpus/"
  # -rss_limit_mb / -malloc_limit_mb: a reader must refuse an absurd size before allocating it;
  # -timeout: no input may take 10 s.
  "$exe" "$dir/corpus" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$dir/" >"$dir/log" 2>&1
  local rc=$? runs cov ft crashes
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$dir/log" | tail -1 | cut -d' ' -f2)
  crashes=$(ls "$dir" | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
  if [ "$rc" -eq 0 ]; then
    printf '%-16s %s: 0 crashes, %s runs, cov %s, ft %s\n' "$name" "$time" "${runs:-?}" "${cov:-?}" "${ft:-?}"
  else
    printf '%-16s %s: FAILED (exit %s, %s artifact(s) in %s), %s runs, cov %s, ft %s\n' "$name" "$time" "$rc" \
      "$crashes" "$dir" "${runs:-?}" "${cov:-?}" "${ft:-?}"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|terminate called|  what\(\))' "$dir/log" | head -5 | sed 's/^/    /'
    return 1
  fi
}

status=0
pids=()
for name in "$@"; do
  if [ ! -x "$bin_dir/${name}_fuzz" ]; then
    echo "$name: no harness $bin_dir/${name}_fuzz (build it with make fuzz-self)" >&2
    status=1
    continue
  fi
  run_one "$name" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$parallel" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
