
set -eu
export LOAD=@LOAD@ ITERATIONS=@ITERATIONS@ ROUNDS=@ROUNDS@ PHASES="@PHASES@" W=/tmp/bench
export STATS_ITERATIONS=$((ITERATIONS / 10))
export BPFTOOL="$(command -v bpftool || echo /usr/sbin/bpftool)"
# Workloads never touch root's home (a safety-floor tree in sessions) or the host's shims.
export HOME=$W/home PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
FP=@FP@
mkdir -p $W/home $W/d/d/d/d/d
echo bench > /tmp/f2; echo bench > $W/file; echo bench > $W/d/d/d/d/d/f8
# The session's policy, and Landlock's ruleset of the same shape (fp-bench-load landlock): read
# everywhere, write in the workspace ($W); plus N generated deny rules (policy-N.toml) that share
# directories, names and suffixes with the workloads' paths, so that a decision really looks them
# up, and match none of the files the workloads touch (every one of them decided in the kernel).
cat > $W/rules.awk <<'END'
{ for (i = 1; i <= $1; i++) { k = i % 6;
    if (k == 0) r = "<workspace>/d/d/n" i "/**";
    else if (k == 1) r = "**/f" i ".h";
    else if (k == 2) r = "<workspace>/**/*.c" i;
    else if (k == 3) r = "<workspace>/x/**/f" i "x*";
    else if (k == 4) r = "<workspace>/x/src/d" (i % 50) "/g" i ".c";
    else r = "**/d" i "x/**";
    printf "  \"%s\",\n", r } }
END
# A helper outside every session, the policies name its sockets (a syslog daemon, a local
# server): the log-send and connect workloads reach it from inside as from outside.
$LOAD serve $W/helper > $W/serve.out &
wait_serve=0; until grep -qs ready $W/serve.out; do
  wait_serve=$((wait_serve + 1)); [ $wait_serve -lt 600 ] || { echo "bench: fp-bench-load serve failed" >&2; exit 1; }
  sleep 0.1
done
for n in 1 1000 10000; do
  { printf '[file_policy]\ndefault = "read"\nwrite_paths = ["<workspace>/**"]\n'
    printf 'sockets = ["<workspace>/helper.dgram", "<workspace>/helper.stream"]\ndeny_paths = [\n'
    echo $n | awk -f $W/rules.awk; echo ']'; } > $W/policy-$n.toml
done
{ cat $W/policy-1.toml; echo 'prompt_paths = ["<workspace>/secrets/**"]'; } > $W/policy-prompt.toml
mkdir -p $W/secrets && echo key > $W/secrets/key

# A source tree of 5,000 small files, as a tar and as a git repository when git is there; the
# build compiles and links five of its files with a main.
echo 'int main(void) { return 0; }' > $W/main.c
awk -v root=$W/src 'BEGIN { for (d = 0; d < 50; d++) { dir = root "/d" d; system("mkdir -p " dir);
  for (f = 0; f < 100; f++) { p = dir "/f" f ".c";
    for (l = 0; l < 20; l++) print "int f" d "_" f "_" l "(void) { return " l "; }" > p; close(p) } } }'
tar -cf $W/tree.tar -C $W src
if command -v git > /dev/null; then
  git -C $W/src init -q && git -C $W/src add -A
  git -C $W/src -c user.name=bench -c user.email=bench@localhost commit -qm tree
fi

# has PHASE: whether the run measures PHASE (cargo xtask bench kernel --phases).
has() { case " $PHASES " in *" $1 "*) return 0;; esac; return 1; }
# measure.sh PHASE ROUND ITERATIONS: every workload once, if the run measures PHASE.
cat > $W/measure.sh <<'END'
set -eu
case " warm-up $PHASES " in *" $1 "*) ;; *) exit 0;; esac
out() { sed "s/^ns_per_op/BENCH $1 $2 $3/"; }
@CMD_TIME@
# timed PHASE ROUND WORKLOAD 'COMMAND'
timed() { t=$(cmd_time "$4"); echo "BENCH $1 $3 $2 $t"; }
$LOAD open /tmp/f2 $3 1 | out $1 open-d2 $2
$LOAD open $W/file $3 1 | out $1 open+close $2
$LOAD open $W/d/d/d/d/d/f8 $3 1 | out $1 open-d8 $2
$LOAD stat $W/file $3 1 | out $1 stat $2
rm -rf $W/x && mkdir $W/x
$LOAD churn $W/x $(($3 / 10)) 1 | out $1 churn $2
# A datagram per message to the helper (syslog through /dev/log), a connection per op.
$LOAD send $W/helper $3 1 | out $1 log-send $2
$LOAD connect $W/helper $(($3 / 10)) 1 | out $1 connect $2
timed $1 $2 tar-x 'tar -xf $W/tree.tar -C $W/x'
timed $1 $2 find+cat 'find $W/x -type f -exec cat {} + > /dev/null'
# Many short processes: forks, execs, pipes and their signals (the boundary's global hooks).
timed $1 $2 procs 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo $i | cat | wc -c > /dev/null; sh -c "kill -0 \$\$"; done'
if command -v cc > /dev/null; then
  mkdir $W/x/obj $W/x/tmp
  timed $1 $2 build '(cd $W/x/obj && TMPDIR=$W/x/tmp cc -O0 -o prog $W/main.c $W/x/src/d1/f[0-4].c)'
fi
if [ -d $W/src/.git ]; then
  timed $1 $2 git-status 'git -C $W/src status --porcelain > /dev/null'
fi
END
# session.sh ROUND ITERATIONS [PHASE]: the inside phase, run in the session once the outer script writes
# to the fifo (the outside phase runs first, while the session waits with fp's programs attached).
cat > $W/session.sh <<'END'
set -eu
touch $W/ready
read go < $W/go
sh $W/measure.sh ${3:-inside} $1 $2
if [ "$1" = stats ]; then touch $W/measured; read go < $W/go; fi
END
# stats.sh PHASE: each loaded fp or pass-through program's run time, count and the instructions
# the verifier processed to load it (bpf_prog_info.verified_insns, which Debian's bpftool 7.1 does
# not print: read with bpf(2) itself). bpf() is refused inside sessions, so this always runs
# outside them.
cat > $W/stats.sh <<'END'
$BPFTOOL prog show --json | python3 -c '
import ctypes, json, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(321, cmd, buf, 128)  # x86_64 bpf(2)
    if r < 0:
        raise OSError(ctypes.get_errno(), "bpf")
    return r
def verified_insns(prog_id):
    fd = bpf(13, struct.pack("III", prog_id, 0, 0))  # BPF_PROG_GET_FD_BY_ID
    info = ctypes.create_string_buffer(512)
    bpf(15, struct.pack("IIQ", fd, 512, ctypes.addressof(info)))  # BPF_OBJ_GET_INFO_BY_FD
    return struct.unpack_from("I", info.raw, 216)[0]  # bpf_prog_info.verified_insns
for p in json.load(sys.stdin):
    if p.get("name", "").startswith(("fp_", "noop_")):
        print("HOOK", sys.argv[1], p["name"], p.get("run_time_ns", 0), p.get("run_cnt", 0),
              verified_insns(p["id"]))' "$1"
END

# Waits (at most 60 s) until `cond` holds.
wait_until() {
  n=0
  until eval "$1"; do
    n=$((n + 1)); [ $n -lt 600 ] || { echo "bench: timed out waiting for: $1" >&2; exit 1; }
    sleep 0.1
  done
}
# Unpinned links detach asynchronously: the next phase starts once no program is left.
unloaded='! $BPFTOOL prog show | grep -qE " name (fp|noop)_"'
stats() { [ "$1" != stats ] || echo "$2" > /proc/sys/kernel/bpf_stats_enabled; }
alive() { kill -0 "$1" || { echo "bench: $2 failed" >&2; exit 1; }; }

# round R ITERATIONS: every phase once. R = stats: the pass with bpf_stats on; stats.sh reads the
# programs' counters (fp's after outside, then again after inside: the parser subtracts).
round() {
  sh $W/measure.sh baseline $1 $2

  if has noop; then
    $LOAD noop > $W/noop.out &
    noop=$!
    while ! grep -qs attached $W/noop.out; do alive $noop "fp-bench-load noop"; sleep 0.1; done
    stats $1 1; sh $W/measure.sh noop $1 $2; stats $1 0
    [ "$1" != stats ] || sh $W/stats.sh noop
    kill $noop; wait $noop || true
    wait_until "$unloaded"
  fi

  if has noop-cgroup; then
    cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)/fp-bench
    mkdir -p $cg/s
    $LOAD noop $cg > $W/noop.out &
    noop=$!
    while ! grep -qs attached $W/noop.out; do alive $noop "fp-bench-load noop $cg"; sleep 0.1; done
    stats $1 1
    sh -c "echo \$\$ > $cg/s/cgroup.procs && exec sh $W/measure.sh noop-cgroup $1 $2"
    stats $1 0
    [ "$1" != stats ] || sh $W/stats.sh noop-cgroup
    kill $noop; wait $noop || true
    wait_until "$unloaded"
    wait_until "rmdir $cg/s $cg 2> /dev/null"
  fi

  if has noop-fmod-ret; then
    $LOAD noop --fmod-ret > $W/noop.out &
    noop=$!
    while ! grep -qs attached $W/noop.out; do alive $noop "fp-bench-load noop --fmod-ret"; sleep 0.1; done
    stats $1 1; sh $W/measure.sh noop-fmod-ret $1 $2; stats $1 0
    [ "$1" != stats ] || sh $W/stats.sh noop-fmod-ret
    kill $noop; wait $noop || true
    wait_until "$unloaded"
  fi

  if has outside || has inside; then
    around_session policy-1.toml "" outside inside $1 $2
  fi

  # The same, with 1,000 and 10,000 generated rules (not in the bpf_stats pass).
  if [ "$1" != stats ]; then
    for n in 1000 10000; do
      has inside-$n || continue
      $FP run --policy $W/policy-$n.toml --workspace $W -- sh $W/measure.sh inside-$n $1 $2
      wait_until "$unloaded"
    done
  fi

  ! has landlock || $LOAD landlock $W -- sh $W/measure.sh landlock $1 $2

  # fp run's start: from its exec to the command's first instruction (load, verify, attach).
  if [ "$1" != stats ] && has inside; then
    s=$(date +%s%N); e=$($FP run --policy $W/policy-1.toml --workspace $W -- date +%s%N)
    echo "START $1 $((e - s))"
    wait_until "$unloaded"
  fi

  # A session with a prompt rule lives (its broker runs): measured outside, then inside it.
  if [ "$1" != stats ] && { has outside-prompt || has inside-prompt; }; then
    around_session policy-prompt.toml "" outside-prompt inside-prompt $1 $2
  fi

  # fp on its fmod_ret backend (the kernel's security_* functions, where the BPF LSM is not
  # active): outside, then inside a session of the base policy plus 1.
  if has outside-fmod-ret || has inside-fmod-ret; then
    around_session policy-1.toml fmod_ret outside-fmod-ret inside-fmod-ret $1 $2
  fi
}

# around_session POLICY BACKEND OUTSIDE INSIDE ROUND ITERATIONS: a session of POLICY on BACKEND
# (FP_BACKEND; empty: fp's choice) lives: phase OUTSIDE measured outside it, then INSIDE in it.
# In the stats round, fp's programs' counters after OUTSIDE, then after both (OUTSIDE+INSIDE).
around_session() {
  rm -f $W/ready $W/go $W/measured && mkfifo $W/go
  FP_BACKEND=$2 $FP run --policy $W/$1 --workspace $W -- sh $W/session.sh $5 $6 $4 &
  session=$!
  while [ ! -e $W/ready ]; do alive $session "fp run"; sleep 0.2; done
  stats $5 1; sh $W/measure.sh $3 $5 $6
  [ "$5" != stats ] || sh $W/stats.sh $3
  echo go > $W/go
  if [ "$5" = stats ]; then
    while [ ! -e $W/measured ]; do alive $session "fp run"; sleep 0.2; done
    stats $5 0; sh $W/stats.sh $3+$4
    echo go > $W/go
  fi
  wait $session
  wait_until "$unloaded"
}

# One untimed pass first: the baseline must not pay for cold caches alone.
sh $W/measure.sh warm-up 0 1000 > /dev/null
r=1
while [ $r -le $ROUNDS ]; do round $r $ITERATIONS; r=$((r + 1)); done

# A session's start through the daemon (programs loaded once, attached per session): `fp run` to
# the command's first instruction, against the same command started alone, rounds interleaved.
# After the rounds: the daemon's programs would be in every phase's way.
if has inside; then
  $FP audit keygen $W/daemon-key > /dev/null
  printf '[daemon]\nsocket = "%s"\n[audit]\nlog = "%s"\nkey = "%s"\n' \
    $W/fp.sock $W/daemon-log/audit.log $W/daemon-key.key > $W/daemon.toml
  $FP daemon --config $W/daemon.toml 2> $W/daemon.err &
  daemon=$!
  while [ ! -S $W/fp.sock ]; do alive $daemon "fp daemon"; sleep 0.2; done
  r=1
  while [ $r -le $ROUNDS ]; do
    s=$(date +%s%N); e=$(sh -c 'exec date +%s%N'); echo "START-BARE $r $((e - s))"
    s=$(date +%s%N)
    e=$($FP run --socket $W/fp.sock --policy $W/policy-1.toml --workspace $W -- date +%s%N)
    echo "START-DAEMON $r $((e - s))"
    r=$((r + 1))
  done
  # What an agent harness waits for: Claude Code's first model request (a scripted model), under
  # its profile through the daemon and alone, as the agent user, rounds interleaved.
  FP_TEST_VM=1 $LOAD agent-start @CLAUDE@ $FP $W/fp.sock $ROUNDS
  kill -TERM $daemon; wait $daemon || true
  wait_until "$unloaded"
fi
round stats $STATS_ITERATIONS > $W/stats.out
grep '^HOOK' $W/stats.out
