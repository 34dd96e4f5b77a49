#!/usr/bin/env bash
# bench/run.sh BUILD_DIR: RunSnack against raw TCP, socat and ssh -L, all on
# 127.0.0.1 and all measured in this one run; prints one table with ratios.
# See docs/PERFORMANCE.md. Needs socat and openssh-server (scripts/install-deps);
# the ssh rows are skipped when sshd cannot start (e.g. not root).
#
# Every process started here is killed by PID on exit; the temp dir is removed.
set -uo pipefail

BUILD=${1:-build/release}
BENCH=$BUILD/bench/session_bench
[[ -x $BENCH ]] || { echo "run.sh: $BENCH not built (ninja -C $BUILD session_bench)" >&2; exit 1; }

source "$(dirname "$0")/lib.sh"
bench_scratch bench

RESULTS=$TMP/results
: >"$RESULTS"
measure() {  # measure PORT LABEL
  echo "== $2 (127.0.0.1:$1)" >&2
  "$BENCH" tcp "$1" "$2" | grep '^RESULT' >>"$RESULTS" || echo "run.sh: $2 failed" >&2
}

# (a) the plain echo/sink server.
"$BENCH" server >"$TMP/server.out" &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q '^PORT' "$TMP/server.out" 2>/dev/null && break; sleep 0.05; done
SERVER_PORT=$(awk '/^PORT/{print $2}' "$TMP/server.out")
[[ -n $SERVER_PORT ]] || { echo "run.sh: bench server did not start" >&2; exit 1; }
measure "$SERVER_PORT" raw

# (b) socat relay in front of it.
if command -v socat >/dev/null; then
  SOCAT_PORT=$(free_port)
  socat TCP-LISTEN:"$SOCAT_PORT",bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:"$SERVER_PORT" &
  PIDS+=($!)
  wait_port "$SOCAT_PORT" && measure "$SOCAT_PORT" socat
else
  echo "run.sh: socat not installed, skipping" >&2
fi

# (c) ssh -L through a throwaway sshd.
SSHD=/usr/sbin/sshd
if [[ -x $SSHD && $(id -u) == 0 ]] && command -v ssh >/dev/null; then
  mkdir -p /run/sshd  # sshd's privilege separation directory
  ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$TMP/user_key"
  cp "$TMP/user_key.pub" "$TMP/authorized_keys"
  SSH_PORT=$(free_port)
  cat >"$TMP/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $TMP/host_key
AuthorizedKeysFile $TMP/authorized_keys
PidFile $TMP/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
LogLevel ERROR
EOF
  "$SSHD" -D -e -f "$TMP/sshd_config" 2>"$TMP/sshd.log" &
  PIDS+=($!)
  if wait_port "$SSH_PORT"; then
    for cipher in aes128-gcm@openssh.com default; do
      FWD_PORT=$(free_port)
      label=ssh-aes128gcm
      cipher_opt=(-c aes128-gcm@openssh.com)
      if [[ $cipher == default ]]; then label=ssh-default; cipher_opt=(); fi
      ssh "${cipher_opt[@]}" -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
        -o ExitOnForwardFailure=yes -i "$TMP/user_key" -p "$SSH_PORT" -N \
        -L 127.0.0.1:"$FWD_PORT":127.0.0.1:"$SERVER_PORT" root@127.0.0.1 &
      SSH_PID=$!
      PIDS+=($SSH_PID)
      if wait_port "$FWD_PORT"; then measure "$FWD_PORT" "$label"; else echo "run.sh: ssh -L ($label) failed" >&2; fi
      kill "$SSH_PID" 2>/dev/null; wait "$SSH_PID" 2>/dev/null
    done
  else
    echo "run.sh: sshd did not start: $(cat "$TMP/sshd.log")" >&2
  fi
else
  echo "run.sh: sshd needs root and openssh-server; skipping ssh rows" >&2
fi

# (d) RunSnack: a real provider (forked child) and a real consumer session.
echo "== runsnack (provider in a child process, RUNSNACK_HOME=$TMP/home)" >&2
mkdir -p "$TMP/home"
RUNSNACK_HOME=$TMP/home "$BENCH" runsnack "$TMP/home" >"$TMP/runsnack.out" &
BENCH_PID=$!
PIDS+=($BENCH_PID)
wait "$BENCH_PID" || echo "run.sh: runsnack bench failed" >&2
grep '^RESULT' "$TMP/runsnack.out" >>"$RESULTS"

# ---------------------------------------------------------------- the table
awk -v cores="$(nproc)" '
  { v[$2 "," $3] = $4; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
  function get(k) { return (k in v) ? v[k] : "" }
  function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.2fx", a / b) : "n/a" }
  END {
    printf "\nRunSnack bench, 127.0.0.1, %d CPUs, single stream\n\n", cores
    printf "%-15s %12s %12s %12s\n", "path", "Gbit/s", "RTT p50 us", "RTT p99 us"
    for (i = 0; i < n; i++) {
      p = order[i]
      if (get(p ",throughput_gbps") == "") continue
      printf "%-15s %12s %12s %12s\n", p, get(p ",throughput_gbps"), get(p ",rtt_median_us"), get(p ",rtt_p99_us")
    }
    t = get("runsnack,throughput_gbps")
    printf "\nthroughput  runsnack/raw %s  runsnack/socat %s  runsnack/ssh-aes128gcm %s  runsnack/ssh-default %s\n",
      ratio(t, get("raw,throughput_gbps")), ratio(t, get("socat,throughput_gbps")),
      ratio(t, get("ssh-aes128gcm,throughput_gbps")), ratio(t, get("ssh-default,throughput_gbps"))
    r = get("runsnack,rtt_median_us"); s = get("socat,rtt_median_us")
    printf "RTT p50     runsnack/socat %s  (goal <= 1.30x)\n", ratio(r, s)
    printf "\nsession setup (Consumer::connect: TCP + TLS + grant proof): median %s ms, p90 %s ms (goal < 20 ms)\n",
      get("runsnack,setup_median_ms"), get("runsnack,setup_p90_ms")
    printf "provider RSS: idle %s MiB (goal < 20), %s MiB before / %s MiB with %s idle sessions: %s KiB per session (goal < 1024)\n",
      get("runsnack,provider_rss_idle_mib"), get("runsnack,provider_rss_before_sessions_mib"),
      get("runsnack,provider_rss_sessions_mib"), get("runsnack,provider_idle_sessions"),
      get("runsnack,provider_kib_per_session")
  }' "$RESULTS"
