# Shared set-up of the bench scripts (sourced): a scratch folder and the processes started in
# it, both removed on exit; loopback port helpers.
#   bench_scratch NAME   sets TMP (a fresh /tmp/runsnack-NAME.XXXXXX) and PIDS (append the
#                        PIDs of what the script starts; they are killed and reaped on exit)

bench_scratch() {
  TMP=$(mktemp -d "/tmp/runsnack-$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$TMP"
}

# A free loopback port (bind to port 0, read it back, close).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# Waits (up to 10 s) until something listens on 127.0.0.1:$1.
wait_port() {
  for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done
  return 1
}

# Starts a throwaway sshd on a free loopback port (root with openssh-server only), the peer the
# benches measure `ssh -L` against: sets SSH_PORT, SSHD_PID and the client key $TMP/user_key.
# Fails when sshd cannot run or does not listen.
start_sshd() {
  [[ -x /usr/sbin/sshd && $(id -u) == 0 ]] && command -v ssh >/dev/null || return 1
  mkdir -p /run/sshd
  ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key"; ssh-keygen -q -t ed25519 -N '' -f "$TMP/user_key"
  cp "$TMP/user_key.pub" "$TMP/authorized_keys"
  SSH_PORT=$(free_port)
  printf '%s\n' "Port $SSH_PORT" "ListenAddress 127.0.0.1" "HostKey $TMP/host_key" \
    "AuthorizedKeysFile $TMP/authorized_keys" "PidFile $TMP/sshd.pid" "StrictModes no" "UsePAM no" \
    "PermitRootLogin prohibit-password" "PasswordAuthentication no" "AllowTcpForwarding yes" "LogLevel ERROR" \
    >"$TMP/sshd_config"
  /usr/sbin/sshd -D -e -f "$TMP/sshd_config" 2>"$TMP/sshd.log" & SSHD_PID=$!; PIDS+=($SSHD_PID)
  wait_port "$SSH_PORT"
}
