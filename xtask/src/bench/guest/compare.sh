
set -eu
export W=/tmp/compare LOAD=@LOAD@ HOME=/tmp/compare/home
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
BPFTOOL="$(command -v bpftool || echo /usr/sbin/bpftool)"
mkdir -p $W/home && echo bench > $W/file
printf '[file_policy]\ndefault = "read"\nwrite_paths = ["<workspace>/**"]\ndeny_paths = ["**/f1.h"]\n' > $W/policy.toml
awk -v root=$W/src 'BEGIN { for (d = 0; d < 50; d++) { dir = root "/d" d; system("mkdir -p " dir);
  for (f = 0; f < 100; f++) { p = dir "/f" f ".c"; print "int f" f ";" > p; close(p) } } }'
tar -cf $W/tree.tar -C $W src
cat > $W/session.sh <<'END'
set -eu
$LOAD open $W/file 20000 1 | sed "s/^ns_per_op/CMP $1 $2 open+close/"
@CMD_TIME@
t=$(cmd_time 'tar -xf $W/tree.tar -C $W/x'); echo "CMP $1 $2 tar-x $t"
$LOAD churn $W/y 2000 1 | sed "s/^ns_per_op/CMP $1 $2 churn/"
touch $W/done
read go < $W/go
END
echo 1 > /proc/sys/kernel/bpf_stats_enabled
r=1
while [ $r -le @ROUNDS@ ]; do
  for build in before after; do
    if [ $build = before ]; then fp=@BEFORE@; else fp=@AFTER@; fi
    rm -rf $W/x $W/y $W/done $W/go && mkdir $W/x $W/y && mkfifo $W/go
    $fp run --policy $W/policy.toml --workspace $W -- sh $W/session.sh $build $r &
    session=$!
    n=0
    until [ -e $W/done ]; do
      kill -0 $session || { echo "compare: fp run ($build) failed" >&2; exit 1; }
      n=$((n + 1)); [ $n -lt 3000 ] || { echo "compare: timed out" >&2; exit 1; }
      sleep 0.1
    done
    $BPFTOOL prog show --json | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name", "").startswith("fp_") and p.get("run_cnt", 0) > 0:
        print("PROG", sys.argv[1], sys.argv[2], p["name"], p.get("run_time_ns", 0), p["run_cnt"])' $build $r
    echo go > $W/go
    wait $session
    while $BPFTOOL prog show | grep -qE " name fp_"; do sleep 0.1; done
    # fp run's start: from its exec to the command's first instruction (load, verify, attach).
    s=$(date +%s%N); e=$($fp run --policy $W/policy.toml --workspace $W -- date +%s%N)
    echo "CMP $build $r start $((e - s))"
    while $BPFTOOL prog show | grep -qE " name fp_"; do sleep 0.1; done
  done
  r=$((r + 1))
done
