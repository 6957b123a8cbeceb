# cmd_time 'COMMAND': the ns COMMAND took by the wall clock, or with FP_BENCH_CPU_TIME=1
# (--instruction-clock) its processes' CPU time: an idle guest's instruction clock jumps.
cmd_time() {
  if [ "${FP_BENCH_CPU_TIME:-}" = 1 ]; then t=$($LOAD cpu-time sh -c "$1"); echo "${t#cpu_ns }"
  else s=$(date +%s%N); eval "$1" >&2; e=$(date +%s%N); echo $((e - s)); fi
}
