#!/usr/bin/env python3
"""Numbered UDP datagrams across the WAN lab, to measure loss, bursts,
reordering and blackholes end to end (tests/netlab/accuracy.py).

    udp_probe.py recv BIND_ADDR PORT SECONDS   prints {"event": "ready"}, {"event": "first"} when the
                                               first datagram comes, and the statistics when
                                               nothing came for SECONDS
    udp_probe.py send ADDR PORT COUNT GAP_US    COUNT datagrams, one every GAP_US microseconds

The receiver reports: received, the sequence numbers missing (as runs: count
and mean length), datagrams that arrived after a higher number (reordered),
and the longest gap between two arrivals with the numbers at its ends.
"""
import json, socket, struct, sys, time


def recv(addr, port, quiet_s):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:  # a busy machine may not schedule us for a while: nothing may be lost here meanwhile
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 32 << 20)  # 33: Linux's value
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    s.bind((addr, port))
    print(json.dumps({"event": "ready"}), flush=True)
    s.settimeout(30)  # the first datagram
    seen, order, arrivals = set(), [], []
    total = None
    try:
        while True:
            data = s.recv(2048)
            now = time.monotonic()
            seq, count = struct.unpack("!II", data[:8])
            if total is None:
                print(json.dumps({"event": "first"}), flush=True)
            total = count
            seen.add(seq)
            order.append(seq)
            arrivals.append(now)
            s.settimeout(quiet_s)
    except socket.timeout:
        pass
    missing = [i for i in range(total or 0) if i not in seen]
    runs, prev = 0, None
    for m in missing:
        if prev is None or m != prev + 1:
            runs += 1
        prev = m
    high, reordered = -1, 0
    for seq in order:
        if seq < high:
            reordered += 1
        high = max(high, seq)
    gap, gap_at = 0.0, None
    for i in range(1, len(arrivals)):
        if arrivals[i] - arrivals[i - 1] > gap:
            gap, gap_at = arrivals[i] - arrivals[i - 1], (order[i - 1], order[i])
    print(json.dumps({"sent": total, "received": len(seen), "lost": len(missing), "loss_runs": runs,
                      "mean_run": len(missing) / runs if runs else 0, "reordered": reordered,
                      "longest_gap_s": gap, "gap_between": gap_at}), flush=True)


def send(addr, port, count, gap_us):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"x" * 100
    start = time.monotonic()
    for i in range(count):
        due = start + i * gap_us / 1e6
        while (left := due - time.monotonic()) > 0:
            time.sleep(left)
        s.sendto(struct.pack("!II", i, count) + pad, (addr, port))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "recv":
        recv(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
