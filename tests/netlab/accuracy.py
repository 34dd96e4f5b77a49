#!/usr/bin/env python3
"""The WAN lab's emulator checked end to end (tests/netlab/netlab.py), with
real ping, iperf3 and UDP probes between the consumer and provider namespaces:

- per preset, the median ping RTT the emulator adds (preset minus the same lab
  with no emulation, measured in this run) is within 10% of the preset's RTT;
- per preset, TCP throughput (iperf3, consumer to provider, loss off) is within
  10% of the rate: 0.9x to 1.0x. A rate the machine cannot carry even without
  emulation (measured first) is reported as not judged, with the figure;
- per preset with loss, the one-way loss of numbered UDP datagrams is the
  preset's within 4 standard deviations, and bursty loss comes in runs;
- jitter spreads RTTs; reordering delivers datagrams out of order; a blackhole
  of 2 s stops everything for 2 s and nothing after it.

Needs root; exits 77 (ctest: skipped) when the lab cannot run here.
Usage: accuracy.py WANBRIDGE [preset ...]
"""
import json, math, os, re, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netlab  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "udp_probe.py")
failures = []


def check(ok, what):
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def ping_rtts(lab, count=100, interval=0.005):
    # One ping first so that ARP has resolved (its answer costs a round trip more).
    lab.run("consumer", ["ping", "-c", "2", "-i", "0.2", "-q", netlab.PROVIDER_ADDR], capture_output=True)
    r = lab.run("consumer", ["ping", "-c", str(count), "-i", str(interval), netlab.PROVIDER_ADDR],
                capture_output=True, text=True)
    return [float(x) for x in re.findall(r"time=([\d.]+)", r.stdout)]


def tcp_mbit(lab, seconds=4, omit=1):
    # 4 s after a 1 s slow start left out: at the presets' rates (and a 20-200 ms RTT) that is many
    # round trips at the bridge's rate limit, so the figure is already steady to well under 10%.
    srv = lab.popen("provider", ["iperf3", "-s", "-1", "-B", netlab.PROVIDER_ADDR, "-p", "5201"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        r = lab.run("provider", ["ss", "-ltn", "sport = :5201"], capture_output=True, text=True)
        if "LISTEN" in r.stdout:
            break
        time.sleep(0.1)
    r = lab.run("consumer", ["iperf3", "-c", netlab.PROVIDER_ADDR, "-p", "5201", "-t", str(seconds), "-O", str(omit),
                             "-J"], capture_output=True, text=True, timeout=seconds + omit + 60)
    netlab.stop(srv)
    if r.returncode != 0:
        raise RuntimeError(f"iperf3: {r.stdout[-500:]} {r.stderr[-500:]}")
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6


def udp(lab, count, gap_us, during=None):
    """Sends `count` numbered datagrams consumer -> provider; `during(lab)` runs
    one second after the first one arrived. Returns the receiver's statistics."""
    rx = lab.popen("provider", ["python3", PROBE, "recv", netlab.PROVIDER_ADDR, "9000", "3"],
                   stdout=subprocess.PIPE, text=True)
    assert '"ready"' in rx.stdout.readline()
    tx = lab.popen("consumer", ["python3", PROBE, "send", netlab.PROVIDER_ADDR, "9000", str(count), str(gap_us)])
    assert '"first"' in rx.stdout.readline()
    if during:
        time.sleep(1)
        during(lab)
    tx.wait(timeout=count * gap_us / 1e6 + 60)
    out = rx.stdout.readline()
    rx.wait(timeout=30)
    return json.loads(out)


def judge_preset(lab, name, base_mbit):
    p = netlab.PRESETS[name]
    print(f"{name}: {p}", flush=True)
    # The lab's own RTT (a few hundred microseconds on a busy VM) drifts with the load: measured in
    # turns with the preset's, so that both see the same machine.
    rtts, base = [], []
    for _ in range(5):
        lab.set("none")
        base += ping_rtts(lab, count=50)
        lab.set(name)
        rtts += ping_rtts(lab, count=50)
    base_rtt = statistics.median(base)
    added = statistics.median(rtts) - base_rtt
    target = p["rtt_ms"]
    check(abs(added - target) <= 0.1 * target,
          f"RTT added {added:.3f} ms (median {statistics.median(rtts):.3f} of {len(rtts)} pings, lab without "
          f"emulation {base_rtt:.3f}) vs {target} ms (+-10%)")
    if p.get("jitter_ms"):
        spread = statistics.pstdev(rtts)
        check(spread >= p["jitter_ms"] / 3, f"jitter: RTT standard deviation {spread:.1f} ms (+-{p['jitter_ms']} ms "
                                            f"each way: expected about {p['jitter_ms'] * 0.82:.1f})")
    if p.get("rate_mbit"):
        rate = p["rate_mbit"]
        lab.set(name, loss=0)
        mbit = tcp_mbit(lab)
        if mbit < 0.9 * rate:
            # A scheduling hiccup of the user-space bridge on a busy machine can only lower the
            # figure, never lift it past the rate: a second measurement decides, and the upper
            # bound still judges both.
            print(f"  TCP {mbit:.1f} Mbit/s under 0.9x the rate: measuring once more", flush=True)
            mbit = max(mbit, tcp_mbit(lab))
        if base_mbit < 1.1 * rate:
            print(f"  not judged: TCP {mbit:.0f} Mbit/s at rate {rate}, but this machine carries only "
                  f"{base_mbit:.0f} Mbit/s through the lab without emulation (busy or slow)", flush=True)
        else:
            check(0.9 * rate <= mbit <= 1.0 * rate,
                  f"TCP {mbit:.1f} Mbit/s vs rate {rate} Mbit/s (0.9x..1.0x; Ethernet framing caps it at "
                  f"{rate * 1448 / 1514:.1f})")
    if p.get("loss"):
        lab.set(name)
        loss, burst = p["loss"], p.get("loss_burst", 1)
        count = int(min(40000, max(5000, 60 / loss)))
        st = udp(lab, count, 150)
        expected = count * loss
        sigma = math.sqrt(count * loss * (1 - loss) * (2 * burst - 1))
        check(abs(st["lost"] - expected) <= 4 * sigma + 1,
              f"loss {st['lost']} of {count} UDP datagrams ({100 * st['lost'] / count:.2f}%) vs {100 * loss}% "
              f"(expected {expected:.0f} +- {4 * sigma:.0f})")
        if burst > 1:
            check(0.6 * burst <= st["mean_run"] <= 1.6 * burst,
                  f"loss bursts: mean run {st['mean_run']:.2f} datagrams vs {burst}")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    presets = argv[2:] or ["lan", "city", "continent", "bad-wifi"]
    try:
        for tool in ("ping", "iperf3", "ss"):
            if not netlab.shutil.which(tool):
                raise netlab.Skip(f"{tool} is not installed (scripts/install-deps)")
        lab = netlab.WanLab("none", bridge=argv[1])
    except netlab.Skip as why:
        print(f"netlab accuracy: SKIPPED: {why}")
        return netlab.SKIPPED
    with lab:
        base_rtt = statistics.median(ping_rtts(lab))
        base_mbit = tcp_mbit(lab, seconds=2)  # only compared with 1.1x each rate: a rough figure does
        print(f"lab without emulation: RTT median {base_rtt:.3f} ms, TCP {base_mbit:.0f} Mbit/s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        for name in presets:
            judge_preset(lab, name, base_mbit)

        print("reordering: city without loss, 5% of datagrams held back 3 ms", flush=True)
        lab.set("city", loss=0, reorder=0.05, reorder_ms=3)
        st = udp(lab, 4000, 200)
        check(st["lost"] == 0 and 0.03 * 4000 <= st["reordered"] <= 0.07 * 4000,
              f"{st['reordered']} of 4000 datagrams arrived after a later one, {st['lost']} lost")

        print("blackhole: 2 s in the middle of a datagram every 10 ms", flush=True)
        lab.set("outage")
        st = udp(lab, 500, 10000, during=lambda lab: lab.outage(2))
        check(1.9 <= st["longest_gap_s"] <= 2.2 and 180 <= st["lost"] <= 210,
              f"longest gap {st['longest_gap_s']:.3f} s, {st['lost']} of 500 lost (expected about 200)")
        print(f"bridge counters: {json.dumps(lab.stats())}")
    if failures:
        print(f"netlab accuracy: {len(failures)} check(s) FAILED")
        return 1
    print("netlab accuracy: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
