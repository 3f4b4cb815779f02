#!/bin/sh
# The genetic search against random search of the same evaluation budget, on a fixed set of seeded
# generated models (not run by make test or make bench: it takes minutes). For each model both arms
# start from the same case with the same --seed and --budget; the script prints, per arm:
#   A. backends PAIR (default: the numpy float32 ONNX runner of examples/exec, persistent, against
#      the float64 reference; in a build with the libraries e.g. torch,onednn): the best inconsistency
#      distance (mean |difference| at the logits) each arm reached, and the time per search
#      iteration (generation);
#   B. backends faulty:band=OP@LO..HI: the share of models where the arm triggers the band fault.
# Usage: bench/search_vs_random.sh [BUILD_DIR] [MODELS] [BUDGET] [BAND] [PAIR]
#   defaults: build 100 100 tanh@3..3.05 exec:persistent+/usr/bin/python3+examples/exec/numpy_onnx.py
set -eu
build=${1:-build}
models=${2:-100}
budget=${3:-100}
band=${4:-tanh@3..3.05}
pair=${5:-exec:persistent+/usr/bin/python3+examples/exec/numpy_onnx.py}
q="$build/quorum"
work=${OUT:-$(mktemp -d)}  # the raw result lines stay there
mkdir -p "$work"
rm -rf "$work/models" "$work/out"
"$q" gen --generator muffin --count "$models" --seed 1 --max_nodes 8 --out "$work/models" >/dev/null
op=${band%@*}
for arm in ga random; do
  : >"$work/$arm.a"
  : >"$work/$arm.b"
done
for m in "$work"/models/model_*.json; do
  for arm in ga random; do
    "$q" search --method "$arm" --model "$m" --backends "$pair" --budget "$budget" --seed 7 --mode infer \
      --out "$work/out" 2>/dev/null | grep '^result:' >>"$work/$arm.a" || echo "result: failed" >>"$work/$arm.a"
    "$q" search --method "$arm" --model "$m" --backends "faulty:band=$band" --budget "$budget" --seed 7 \
      --mode infer --fitness nan --out "$work/out" 2>/dev/null | grep -E "^(found|result):" | tr '\n' ' ' \
      >>"$work/$arm.b" || true
    echo >>"$work/$arm.b"
  done
done
for arm in ga random; do
  echo "== $arm (budget $budget evaluations, $models models, seed 1, search seed 7)"
  # A: best distance per model, and seconds per generation.
  med=$(sed -n 's/.* best=\([^ ]*\).*/\1/p' "$work/$arm.a" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }')
  awk -v med="$med" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         if (v["best"] != "") { n++; sum += v["best"]; secs += v["seconds"]; gens += v["generations"];
                                if (v["best"] + 0 > 0) pos++ } }
       END { if (!n) { print "A: no results"; exit }
             printf "A: %d models; best distance: mean %.6g, median %s, > 0 on %d; %.4f s per generation\n",
                    n, sum / n, med, pos, gens ? secs / gens : 0 }' "$work/$arm.a"
  total=$(grep -c . "$work/$arm.b" || true)
  hit=$(grep -c "found: verdict.*faulty:band=[^ ]* $op " "$work/$arm.b" || true)
  evals=$(grep "found: verdict.*faulty:band=[^ ]* $op " "$work/$arm.b" | sed 's/.*evaluations=\([0-9]*\).*/\1/' |
          sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "-" }')
  echo "B: band fault $band triggered in $hit of $total models (median evaluations to it: $evals)"
done
echo "raw results: $work"
# Per-model pairs, for the closing note.
paste -d'|' "$work/ga.a" "$work/random.a" | awk -F'|' '
  { split($1, a, " best="); split(a[2], x, " "); split($2, b, " best="); split(b[2], y, " ");
    if (x[1] != "" && y[1] != "") { n++; if (x[1] + 0 > y[1] + 0) w++; else if (x[1] + 0 < y[1] + 0) l++ } }
  END { printf "A: GA reached a larger distance than random on %d of %d models, smaller on %d\n", w, n, l }'
