#!/usr/bin/env bash
# bench/forward.sh BUILD_DIR: `runsnack forward` next to a direct connection and
# `ssh -L`, all on 127.0.0.1 and measured in this one run:
#   - requests/s with wrk on a small HTTP response (keep-alive, 2 threads, 32 connections, 10 s),
#     and the same with a new connection per request (Connection: close: stream open, target
#     connect and audit record each time)
#   - transfer throughput and RTT p50 (bench/session_bench tcp: added latency = forward RTT - direct RTT)
#   - memory per open idle forwarded connection (provider + consumer RSS, 1000 connections; measured
#     first, in fresh processes)
# Needs wrk, python3, and for the ssh rows openssh-server and root (scripts/install-deps).
# Every process started here is killed by PID on exit; the temp dir is removed.
set -uo pipefail

BUILD=${1:-build/release}
BIN=$BUILD/src/cli/runsnack
BENCH=$BUILD/bench/session_bench
[[ -x $BIN ]] || { echo "forward.sh: $BIN not built (ninja -C $BUILD runsnack)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "forward.sh: wrk missing (apt-get install -y wrk)" >&2; exit 1; }

source "$(dirname "$0")/lib.sh"
bench_scratch fwdbench

rss_kib() { awk '/VmRSS/{print $2}' /proc/"$1"/status; }

# A small keep-alive HTTP server (asyncio; 13-byte body) and the session_bench echo/sink server.
cat >"$TMP/http.py" <<'PY'
import asyncio, sys
RESP = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nhello, world\n"
async def serve(r, w):
    buf = b""
    try:
        while True:
            data = await r.read(65536)
            if not data: break
            buf += data
            n = buf.count(b"\r\n\r\n")
            if n:
                close = b"connection: close" in buf.lower()
                buf = buf[buf.rfind(b"\r\n\r\n") + 4:]
                w.write(RESP * n)
                if close: break
    except ConnectionError:
        pass
    w.close()
async def main():
    s = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with s: await s.serve_forever()
asyncio.run(main())
PY
HTTP_PORT=$(free_port)
python3 "$TMP/http.py" "$HTTP_PORT" & PIDS+=($!)
wait_port "$HTTP_PORT" || { echo "forward.sh: http server did not start" >&2; exit 1; }
SINK_PORT=""
if [[ -x $BENCH ]]; then
  "$BENCH" server >"$TMP/server.out" & PIDS+=($!)
  for _ in $(seq 1 100); do grep -q '^PORT' "$TMP/server.out" 2>/dev/null && break; sleep 0.05; done
  SINK_PORT=$(awk '/^PORT/{print $2}' "$TMP/server.out")
fi
ECHO_PORT=$(free_port)
python3 -c '
import socket, socketserver, sys
class H(socketserver.BaseRequestHandler):
    def handle(self):
        while self.request.recv(65536): pass
class S(socketserver.ThreadingTCPServer):
    daemon_threads = True; allow_reuse_address = True; request_queue_size = 2048
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$ECHO_PORT" & PIDS+=($!)
wait_port "$ECHO_PORT"

# The provider exposes all three; the consumer forwards each to a local port.
mkdir -p "$TMP/p" "$TMP/c"
exposes=(--expose "http=$HTTP_PORT" --expose "echo=$ECHO_PORT")
[[ -n $SINK_PORT ]] && exposes+=(--expose "sink=$SINK_PORT")
RUNSNACK_HOME=$TMP/p "$BIN" share --json --listen 127.0.0.1:0 "${exposes[@]}" >"$TMP/share.out" 2>"$TMP/share.err" &
SHARE_PID=$!; PIDS+=($SHARE_PID)
for _ in $(seq 1 200); do grep -q '"ready"' "$TMP/share.out" && break; sleep 0.05; done
LINK=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["link"])' "$TMP/share.out")
F_HTTP=$(free_port); F_ECHO=$(free_port); F_SINK=$(free_port)
specs=("$F_HTTP:http" "$F_ECHO:echo")
[[ -n $SINK_PORT ]] && specs+=("$F_SINK:sink")
RUNSNACK_HOME=$TMP/c "$BIN" forward --json "$LINK" "${specs[@]}" >"$TMP/fwd.out" 2>"$TMP/fwd.err" &
FWD_PID=$!; PIDS+=($FWD_PID)
for _ in $(seq 1 200); do grep -q '"ready"' "$TMP/fwd.out" && break; sleep 0.05; done
grep -q '"ready"' "$TMP/fwd.out" || { echo "forward.sh: runsnack forward did not start: $(cat "$TMP/fwd.err")" >&2; exit 1; }

# ssh -L to the same servers, when sshd can run here.
SSH_HTTP=""; SSH_SINK=""
if start_sshd; then
  SSH_HTTP=$(free_port); SSH_SINK=$(free_port)
  fwd=(-L "127.0.0.1:$SSH_HTTP:127.0.0.1:$HTTP_PORT")
  [[ -n $SINK_PORT ]] && fwd+=(-L "127.0.0.1:$SSH_SINK:127.0.0.1:$SINK_PORT")
  ssh -c aes128-gcm@openssh.com -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
    -o ExitOnForwardFailure=yes -i "$TMP/user_key" -p "$SSH_PORT" -N "${fwd[@]}" root@127.0.0.1 & PIDS+=($!)
  wait_port "$SSH_HTTP" || SSH_HTTP=""
fi

RESULTS=$TMP/results; : >"$RESULTS"
wrk_rps() {  # wrk_rps PORT LABEL
  local out; out=$(wrk -t2 -c32 -d10s --latency "http://127.0.0.1:$1/" 2>&1)
  echo "RESULT $2 rps $(awk '/Requests\/sec/{print $2}' <<<"$out")" >>"$RESULTS"
  echo "RESULT $2 wrk_p50 $(awk '$1=="50%"{print $2}' <<<"$out")" >>"$RESULTS"
}
wrk_close_rps() {  # wrk_close_rps PORT LABEL: a new connection per request
  local out; out=$(wrk -t2 -c32 -d10s -H 'Connection: close' "http://127.0.0.1:$1/" 2>&1)
  echo "RESULT $2 rps_close $(awk '/Requests\/sec/{print $2}' <<<"$out")" >>"$RESULTS"
}
# First, while both tunnel processes are fresh: later phases leave freed heap behind that
# the idle connections would reuse, which made this figure depend on what ran before.
echo "== memory per open idle forwarded connection (1000 connections)" >&2
before=$(( $(rss_kib "$SHARE_PID") + $(rss_kib "$FWD_PID") ))
python3 - "$F_ECHO" "$SHARE_PID" "$FWD_PID" "$before" >>"$RESULTS" <<'PY'
import socket, sys, time
port, share, fwd, before = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
def rss(pid):
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
n = 1000
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for s in socks: s.sendall(b"x")  # every stream open end to end
time.sleep(3)
after = rss(share) + rss(fwd)
print("RESULT runsnack-forward kib_per_idle_connection %.1f" % ((after - before) / n))
for s in socks: s.close()
PY

echo "== wrk, small HTTP response" >&2
wrk_rps "$HTTP_PORT" direct
wrk_rps "$F_HTTP" runsnack-forward
[[ -n $SSH_HTTP ]] && wrk_rps "$SSH_HTTP" ssh-aes128gcm
echo "== wrk, a new connection per request" >&2
wrk_close_rps "$HTTP_PORT" direct
wrk_close_rps "$F_HTTP" runsnack-forward
[[ -n $SSH_HTTP ]] && wrk_close_rps "$SSH_HTTP" ssh-aes128gcm
if [[ -n $SINK_PORT ]]; then
  echo "== throughput and RTT (session_bench tcp)" >&2
  "$BENCH" tcp "$SINK_PORT" direct | grep '^RESULT' >>"$RESULTS"
  "$BENCH" tcp "$F_SINK" runsnack-forward | grep '^RESULT' >>"$RESULTS"
  [[ -n $SSH_HTTP ]] && "$BENCH" tcp "$SSH_SINK" ssh-aes128gcm | grep '^RESULT' >>"$RESULTS"
fi

awk '
  { v[$2 "," $3] = $4 }
  function get(k) { return (k in v) ? v[k] : "n/a" }
  function ratio(a, b) { return (a != "n/a" && b != "n/a" && b + 0 > 0) ? sprintf("%.2fx", a / b) : "n/a" }
  END {
    printf "\nrunsnack forward bench, 127.0.0.1\n\n%-18s %12s %10s %14s %10s %10s\n", "path", "wrk req/s", "wrk p50",
      "req/s new conn", "Gbit/s", "RTT p50 us"
    n = split("direct runsnack-forward ssh-aes128gcm", p, " ")
    for (i = 1; i <= n; i++)
      printf "%-18s %12s %10s %14s %10s %10s\n", p[i], get(p[i] ",rps"), get(p[i] ",wrk_p50"), get(p[i] ",rps_close"),
        get(p[i] ",throughput_gbps"), get(p[i] ",rtt_median_us")
    f = "runsnack-forward"; s = "ssh-aes128gcm"
    printf "\nreq/s forward/ssh %s (goal >= 1.5x)   throughput forward/ssh %s (goal >= 1.5x)\n",
      ratio(get(f ",rps"), get(s ",rps")), ratio(get(f ",throughput_gbps"), get(s ",throughput_gbps"))
    printf "req/s with a new connection per request, forward/ssh %s\n", ratio(get(f ",rps_close"), get(s ",rps_close"))
    if (get(f ",rtt_median_us") != "n/a" && get("direct,rtt_median_us") != "n/a")
      printf "added latency per request (RTT p50 forward - direct): %.0f us (goal < 100)\n", get(f ",rtt_median_us") - get("direct,rtt_median_us")
    printf "memory per open idle forwarded connection (provider + consumer RSS): %s KiB (goal < 64)\n", get(f ",kib_per_idle_connection")
  }' "$RESULTS"
