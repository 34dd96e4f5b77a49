#!/usr/bin/env python3
"""bench/sparse_pull_cost_bench.py RUNSNACK_BIN SIZE [sparse|data] (as root): what a consumer's pull of a large
file costs a provider that runs as an ordinary user (issue 37, finding 2).

sparse (default): `share --disk-quota 50M` (the workspace image mounted by fuse2fs, which answers SEEK_HOLE as
if a file with no blocks were all data) and consumer A's `truncate -s SIZE big`. data: no quota, SIZE of
written zeros. Then: A's `cp remote:big` (killed after 60 s): its time, and the bytes the provider read
(/proc/PID/io rchar); what the provider reads in the 5 s after A's cp is killed; consumer B's 6-byte `cp`
beside two `cp` of A; the time the provider takes to end on SIGTERM beside two more. Makes a throwaway
user (useradd), opens /dev/fuse to users for the run, restores both.
"""
import json, os, pwd, random, shutil, signal, subprocess, sys, tempfile, threading, time

BIN, SIZE = sys.argv[1], sys.argv[2]
# "sparse": --disk-quota 50M (fuse2fs) and `truncate -s SIZE big`; "data": no quota, SIZE of written zeros.
MODE = sys.argv[3] if len(sys.argv) > 3 else "sparse"
tmp = tempfile.mkdtemp(prefix="rs37-")
os.chmod(tmp, 0o755)
name = "rsm%05d" % random.randrange(100000)
subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
user = pwd.getpwnam(name)
fuse_mode = os.stat("/dev/fuse").st_mode & 0o777
os.chmod("/dev/fuse", 0o666)
procs = []


def env(home, extra=None):
    e = dict(os.environ, RUNSNACK_HOME=home, ASAN_OPTIONS="detect_leaks=0")
    e.update(extra or {})
    return e


def home(n, owner=None):
    p = os.path.join(tmp, n)
    os.makedirs(p)
    if owner:
        os.chown(p, owner.pw_uid, owner.pw_gid)
    return p


def rchar(pid):
    with open("/proc/%d/io" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("rchar:"))


def cli(h, *args, timeout=900, cwd=None):
    """(CompletedProcess or None when it ran past `timeout`, seconds)."""
    t = time.monotonic()
    try:
        cp = subprocess.run([BIN] + list(args), capture_output=True, text=True, env=env(h), timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t
    return cp, time.monotonic() - t


try:
    ph = home("provider", user)
    wrapper = ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups", "--"]
    prov = subprocess.Popen(wrapper + [BIN, "share", "--json", "--listen", "127.0.0.1:0", "--no-port-mapping",
                                       "--allow", "run,cp"] + (["--disk-quota", "50M"] if MODE == "sparse" else []),
                            stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "provider.err"), "w"),
                            env=env(ph, {"HOME": ph}), start_new_session=True)
    link = None
    for line in prov.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "ready":
            link = ev["link"]
            break
    assert link, open(os.path.join(tmp, "provider.err")).read()
    threading.Thread(target=lambda: [None for _ in prov.stdout], daemon=True).start()
    a, b = home("a"), home("b")
    wa, wb = home("wa"), home("wb")
    make = ["truncate", "-s", SIZE, "big"] if MODE == "sparse" else \
        ["dd", "if=/dev/zero", "of=big", "bs=1M", "count=%d" % (int(SIZE[:-1]) * 1024), "status=none"]
    cp, _ = cli(a, "run", link, "--sync", wa, "--", *make, cwd=wa)
    assert cp.returncode == 0, cp.stderr
    cp, _ = cli(b, "run", link, "--sync", wb, "--", "sh", "-c", "echo hello > small", cwd=wb)
    assert cp.returncode == 0, cp.stderr
    print("made a %s %s file (A) and a 6-byte file (B)" % (SIZE, MODE), flush=True)

    def start_cp(out):
        return subprocess.Popen([BIN, "cp", link, "remote:big", out + "/"], cwd=wa, env=env(a), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def end(p, limit):
        try:
            p.wait(limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return None
        return p.returncode

    r0, t0 = rchar(prov.pid), time.monotonic()
    one = start_cp(os.path.join(tmp, "out1"))
    rc = end(one, 60)
    t, got = time.monotonic() - t0, rchar(prov.pid) - r0
    print("A: one cp of big: %s after %.1f s; provider read %.2f GiB (%.0f MiB/s): %s" %
          ("killed" if rc is None else "rc %d" % rc, t, got / 2**30, got / 2**20 / t, one.stderr.read().strip()[-300:]),
          flush=True)
    r1 = rchar(prov.pid)
    time.sleep(5)
    print("after A's cp was killed: the provider read %.2f GiB in the next 5 s" % ((rchar(prov.pid) - r1) / 2**30),
          flush=True)

    # Two pulls of A at once, then B's 6-byte cp.
    pulls = [start_cp(os.path.join(tmp, "outp%d" % i)) for i in range(2)]
    time.sleep(5)
    cp, t = cli(b, "cp", link, "remote:small", os.path.join(tmp, "outb") + "/", cwd=wb, timeout=300)
    print("B: 6-byte cp beside two cp of A: %s" % ("no answer in %.0f s" % t if cp is None else
                                                    "%.1f s, rc %d %s" % (t, cp.returncode, cp.stderr.strip()[-200:])),
          flush=True)
    for p in pulls:
        rc = end(p, 1)
        print("  A's cp: %s %s" % ("still running: killed" if rc is None else "rc %d" % rc, p.stderr.read().strip()[-200:]),
              flush=True)
    # SIGTERM while A's work (maybe) still runs.
    pulls = [start_cp(os.path.join(tmp, "outq%d" % i)) for i in range(2)]
    time.sleep(5)
    t = time.monotonic()
    prov.send_signal(signal.SIGTERM)
    try:
        prov.wait(120)
        print("SIGTERM beside two cp of A: the provider ended after %.1f s" % (time.monotonic() - t), flush=True)
    except subprocess.TimeoutExpired:
        print("SIGTERM beside two cp of A: the provider still ran after 120 s; killed", flush=True)
        os.killpg(prov.pid, signal.SIGKILL)
    for p in pulls:
        end(p, 5)
finally:
    try:
        if prov.poll() is None:
            os.killpg(prov.pid, signal.SIGKILL)
            prov.wait()
    except Exception:
        pass
    for line in open("/proc/self/mounts"):
        if tmp in line:
            subprocess.run(["umount", "-l", line.split()[1]])
    os.chmod("/dev/fuse", fuse_mode)
    subprocess.run(["userdel", name], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
