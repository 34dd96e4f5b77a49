#!/usr/bin/env bash
# bench/run_bench.sh [RUNSNACK_BIN]: `runsnack run` against ssh and rsync on
# loopback, measured in the same run (docs/ARCHITECTURE.md section 9):
#   - `runsnack run LINK --no-sync -- true` round trip vs `ssh localhost true`
#   - first sync of a tree of mixed file sizes (TREE_MB, default 1024) vs `rsync -a -e ssh`
#   - no-change re-sync vs rsync
#   - first byte of streamed output; Ctrl-C until the remote process is gone
# Needs root (a throwaway sshd on a loopback port), openssh-server, rsync.
set -euo pipefail
BIN=$(readlink -f "${1:-build/release/src/cli/runsnack}")
TREE_MB=${TREE_MB:-1024}
N=${N:-10}
TMP=$(mktemp -d)
pids=()
mounted=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$mounted" ]; then sleep 0.5; umount "$TMP" || umount -l "$TMP"; rm -f "$TMP.img"; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
# Everything the bench writes goes to a fresh ext4 (a loop-mounted image; FRESH_FS=0 to skip):
# ext4 scans past inodes deleted in the last minutes when it allocates new ones, so on a
# filesystem where a previous run just removed its ~48k files, whichever tool creates files
# first is slowed by it. A fresh filesystem gives both tools the same start.
if [ "${FRESH_FS:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null; then
  truncate -s "$((TREE_MB * 4 + 512))M" "$TMP.img"
  mkfs.ext4 -q -F "$TMP.img"
  mount -o loop "$TMP.img" "$TMP"
  mounted=1
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
ms() { python3 -c "print(f'{($2-$1)*1000:.1f}')"; }

# Provider
RUNSNACK_HOME=$TMP/p "$BIN" share --json --listen 127.0.0.1:0 --allow run,cp >"$TMP/p.out" 2>"$TMP/p.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$TMP/p.out" ] && break; sleep 0.1; done
LINK=$(head -1 "$TMP/p.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["link"])')
rs() { RUNSNACK_HOME=$TMP/c "$BIN" "$@"; }

# sshd
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key"; ssh-keygen -q -t ed25519 -N '' -f "$TMP/user_key"
cp "$TMP/user_key.pub" "$TMP/authorized_keys"
SSH_PORT=$(free_port)
cat >"$TMP/sshd_config" <<CFG
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $TMP/host_key
AuthorizedKeysFile $TMP/authorized_keys
PidFile $TMP/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
LogLevel ERROR
CFG
/usr/sbin/sshd -D -e -f "$TMP/sshd_config" 2>"$TMP/sshd.log" &
pids+=($!)
sleep 0.5
SSH="ssh -q -p $SSH_PORT -i $TMP/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"

mkdir -p "$TMP/empty"
rs run "$LINK" --sync "$TMP/empty" -- true   # warm up: identity, workspace
t0=$(now); for _ in $(seq "$N"); do rs run "$LINK" --no-sync -- true; done; t1=$(now)
t2=$(now); for _ in $(seq "$N"); do $SSH root@127.0.0.1 true; done; t3=$(now)
echo "round trip (run -- true vs ssh true): runsnack $(ms "$t0" "$t1" | awk -v n="$N" '{printf "%.1f", $1/n}') ms, ssh $(ms "$t2" "$t3" | awk -v n="$N" '{printf "%.1f", $1/n}') ms"

# A tree of mixed sizes: half the bytes in 4 large files, the rest in 1-64 KiB files.
python3 - "$TMP/tree" "$TREE_MB" <<'PY'
import os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
random.seed(1)
total = mb << 20
os.makedirs(root)
for i in range(4):
    with open(f"{root}/big{i}.bin", "wb") as f: f.write(os.urandom(total // 8))
left, n = total // 2, 0
while left > 0:
    d = f"{root}/d{n // 200}"; os.makedirs(d, exist_ok=True)
    size = min(left, random.randint(1, 64) << 10)
    data = os.urandom(size // 2) + b"x" * (size - size // 2)   # half compressible
    with open(f"{d}/f{n}.dat", "wb") as f: f.write(data)
    left -= size; n += 1
print(f"tree: {mb} MiB, {n + 4} files")
PY
# Each first sync starts with no dirty pages: the kernel's write-back of the previous gigabyte
# would otherwise throttle whichever runs second.
sync; t0=$(now); rs run "$LINK" --sync "$TMP/tree" -- true 2>/dev/null; t1=$(now)
sync; t2=$(now); rsync -a -e "$SSH" "$TMP/tree/" "root@127.0.0.1:$TMP/rsync-dst/"; t3=$(now)
echo "first sync ${TREE_MB} MiB: runsnack $(ms "$t0" "$t1") ms, rsync -a -e ssh $(ms "$t2" "$t3") ms"
# No-change re-sync: the median of 5 of each. `run` always runs a command after its sync, so the
# sync's own share is told too: the same run minus `run --no-sync -- true`, timed alongside.
rt=(); rr=(); rn=()
for _ in 1 2 3 4 5; do
  t0=$(now); rs run "$LINK" --sync "$TMP/tree" -- true; t1=$(now); rt+=("$(ms "$t0" "$t1")")
  t0=$(now); rs run "$LINK" --no-sync -- true; t1=$(now); rn+=("$(ms "$t0" "$t1")")
  t2=$(now); rsync -a -e "$SSH" "$TMP/tree/" "root@127.0.0.1:$TMP/rsync-dst/"; t3=$(now); rr+=("$(ms "$t2" "$t3")")
done
median() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
echo "no-change re-sync (median of 5): runsnack $(median "${rt[@]}") ms incl. running true (run --no-sync -- true: $(median "${rn[@]}") ms; the sync's share: $(python3 -c "print(f'{$(median "${rt[@]}")-$(median "${rn[@]}"):.1f}')") ms), rsync $(median "${rr[@]}") ms"

# First byte of streamed output: from the start of `runsnack run` to the first line, and from the
# moment the remote command wrote it (its own CLOCK_REALTIME stamp, same machine) to the line
# arriving here; then Ctrl-C until `run` exits. Median of 5.
python3 - "$BIN" "$LINK" "$TMP/c" <<'PY'
import os, signal, statistics, subprocess, sys, time
bin, link, home = sys.argv[1:4]
env = dict(os.environ, RUNSNACK_HOME=home)
start, stream, ctrl_c = [], [], []
for _ in range(5):
    t0 = time.monotonic()
    p = subprocess.Popen([bin, "run", link, "--no-sync", "--", "sh", "-c", "date +%s.%N; sleep 100"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    line = p.stdout.readline(); t1 = time.monotonic(); arrived = time.time()
    start.append((t1 - t0) * 1000); stream.append((arrived - float(line)) * 1000)
    p.send_signal(signal.SIGINT); p.wait(); t2 = time.monotonic()
    ctrl_c.append((t2 - t1) * 1000)
m = statistics.median
print(f"first byte of output: {m(start):.1f} ms from `run` start, {m(stream):.2f} ms from the remote write (median of 5)")
print(f"Ctrl-C to remote command gone (run exited): {m(ctrl_c):.1f} ms (median of 5)")
PY
