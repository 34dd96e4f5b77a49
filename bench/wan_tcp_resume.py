#!/usr/bin/env python3
"""bench/wan_tcp_resume.py: how long after a 10 s blackhole a plain TCP stream
carries on, with Linux's default retransmission backoff (tcp_rto_max_ms 120000)
and with it capped at 1 s (what runsnack sets on its session sockets,
src/net/tcp_tuning.hpp), at 20 and 80 ms RTT, in the WAN lab (tests/netlab).
A server sends a line every 20 ms; the client notes when lines arrive.
Needs root and a built wanbridge (WANBRIDGE or build/release). Prints one line per case.
"""
import os, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "netlab"))
import netlab  # noqa: E402

SERVER = r'''
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 9100)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
i = 0
while True:
    c.sendall(b"%d\n" % i); i += 1; time.sleep(0.02)
'''
CLIENT = r'''
import socket, sys, time
f = socket.create_connection((sys.argv[1], 9100)).makefile("rb")
while f.readline():
    print(time.monotonic(), flush=True)
'''


def main():
    try:
        for rto_max in (120000, 1000):
            for rtt in (20, 80):
                with netlab.WanLab("outage", rtt_ms=rtt) as lab:
                    for role in ("consumer", "provider"):
                        lab.run(role, ["sysctl", "-qw", f"net.ipv4.tcp_rto_max_ms={rto_max}"], check=True)
                    srv = lab.popen("provider", [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
                    srv.stdout.readline()
                    cl = lab.popen("consumer", [sys.executable, "-c", CLIENT, netlab.PROVIDER_ADDR],
                                   stdout=subprocess.PIPE, text=True)
                    arrivals = []
                    threading.Thread(target=lambda: [arrivals.append(float(l)) for l in cl.stdout], daemon=True).start()
                    time.sleep(2)
                    end = time.monotonic() + 10
                    lab.outage(10)
                    time.sleep(22)
                    after = [t for t in arrivals if t >= end]
                    took = f"{after[0] - end:.2f} s" if after else "nothing within 12 s"
                    print(f"tcp_rto_max_ms {rto_max}, RTT {rtt} ms: first data {took} after a 10 s blackhole ended "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    except netlab.Skip as why:
        print(f"wan_tcp_resume: cannot run: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
