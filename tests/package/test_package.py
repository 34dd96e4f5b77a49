#!/usr/bin/env python3
"""The Debian package, end to end (issue 21), as root; exits 77 (ctest: skipped) otherwise.

    test_package.py BUILD_DIR [--previous-binary FILE]

1. Packages BUILD_DIR's binaries with scripts/build-deb --quick (the test build: no second
   build; `make deb` packages build/release the same way) and checks it with lintian: no errors.
2. Makes a "previous version" of it (the same files, version V~prev) to upgrade from; with
   --previous-binary (upgrade_from_rev.sh), with a runsnack built from an older source tree.
3. In a throwaway root (throwaway_root.py: overlay over /, private mount and network
   namespaces; the machine is left as it was), as a user would:
   - dpkg -i the previous package: user and group runsnack, /var/lib/runsnack (3770), the
     identity key (0600, the service's) and grants database (0660), the enabled share unit,
     man pages, completions, the shim libraries;
   - systemd-analyze verify of every unit;
   - runsnack-share.service's ExecStart by hand, hardened as its unit says; `runsnack share`
     by alice (group runsnack) hands its link to it; bob (not in the group) keeps his own
     state; bob's `info` and `run` through that link are served by the service, its sandbox
     running as user runsnack;
   - runsnack --version and runsnack doctor from /usr/bin;
   - runsnack-pool.service by hand: a coordinator with a job in its database;
   - dpkg -i the new package over it with the share service live; after the restart the link
     made before still works, the coordinator still has the job and the submit link;
   - dpkg -r keeps /var/lib/runsnack; dpkg -P removes it, the user, the group, the units'
     enablement, and nothing of the package is left in the root.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

SKIP = 77


def step(text):
    print("== " + text, flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


# ---- outside the namespace: build, lint, make the previous version ------------------------------

def build_packages(build_dir, out, previous_binary=None):
    step("scripts/build-deb --quick " + build_dir)
    started = time.monotonic()
    r = subprocess.run([os.path.join(REPO, "scripts", "build-deb"), build_dir, out, "--quick"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "build-deb failed:\n" + r.stdout + r.stderr)
    deb = r.stdout.strip().splitlines()[-1]
    print("   %s (%.0f s, %.1f MB)" % (os.path.basename(deb), time.monotonic() - started, os.path.getsize(deb) / 1e6))

    step("lintian: no errors")
    # lintian needs about 3 minutes on the sanitised test binary (450 MB): it checks the package
    # with a small ELF in the binary's place (every other file, the maintainer scripts and the
    # units as they are); `make deb`'s release package is what to lint whole.
    lint_tree = os.path.join(out, "lint")
    subprocess.run(["dpkg-deb", "-R", deb, lint_tree], check=True)
    shutil.copy("/bin/true", os.path.join(lint_tree, "usr", "bin", "runsnack"))
    os.remove(os.path.join(lint_tree, "DEBIAN", "md5sums"))
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "--build", lint_tree, os.path.join(out, "lint.deb")],
                   check=True, capture_output=True)
    shutil.rmtree(lint_tree)
    lint_deb = os.path.join(out, "lint.deb")
    r = subprocess.run(["lintian", "--fail-on", "error", "--no-tag-display-limit", "--suppress-tags",
                        "no-md5sums-control-file", lint_deb], capture_output=True, text=True)
    os.remove(lint_deb)
    print("   " + (r.stdout.strip().replace("\n", "\n   ") or "(no tags)"))
    check(r.returncode == 0 and "\nE: " not in "\n" + r.stdout, "lintian reports errors:\n" + r.stdout + r.stderr)

    step("the previous version: the same files as version ~prev")
    version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True, check=True).stdout.strip()
    tree = os.path.join(out, "prev")
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True)
    control = os.path.join(tree, "DEBIAN", "control")
    text = open(control).read().replace("Version: " + version, "Version: %s~prev" % version)
    open(control, "w").write(text)
    if previous_binary:  # upgrade_from_rev.sh: the binary built from an older source tree
        shutil.copy(previous_binary, os.path.join(tree, "usr", "bin", "runsnack"))
        os.remove(os.path.join(tree, "DEBIAN", "md5sums"))
    prev = os.path.join(out, "runsnack_%s~prev.deb" % version)
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "--build", tree, prev], check=True, capture_output=True)
    shutil.rmtree(tree)
    return deb, prev, version


# ---- inside the namespace -----------------------------------------------------------------------

class Scenario:
    def __init__(self, root, deb, prev, version, shim_built, old_binary):
        self.root, self.version, self.shim_built, self.old_binary = root, version, shim_built, old_binary
        os.makedirs(root.at("/tmp/pkg"))
        self.deb = "/tmp/pkg/" + os.path.basename(deb)
        self.prev = "/tmp/pkg/" + os.path.basename(prev)
        shutil.copy(deb, root.at(self.deb))
        shutil.copy(prev, root.at(self.prev))
        self.procs = {}
        self.logs = root.at("/tmp/logs")
        os.makedirs(self.logs)

    def runsnack(self, args, user=None, env=None, check_rc=True, timeout=120, stdin=None):
        return self.root.run(["/usr/bin/runsnack"] + args, user=user, env=env, check=check_rc, timeout=timeout,
                             stdin=stdin)

    def start(self, unit, stdout_file=None):
        log = open(os.path.join(self.logs, unit + ".log"), "ab")
        out = None
        if stdout_file:  # StandardOutput=truncate:FILE, as systemd opens it (root, 0666 & ~UMask)
            out = os.fdopen(os.open(self.root.at(stdout_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        self.procs[unit] = self.root.start_unit(unit, stdout=out, log=log)
        return self.procs[unit]

    def stop(self, unit):
        p = self.procs.pop(unit)
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError(unit + " did not stop on SIGTERM")
        log = open(os.path.join(self.logs, unit + ".log"), errors="replace").read()
        check("Sanitizer" not in log and "runtime error:" not in log, unit + " log has a sanitizer report:\n" + log)
        check(rc == 0, "%s exited with %d:\n%s" % (unit, rc, log[-3000:]))

    def stop_all(self):
        for unit in list(self.procs):
            p = self.procs.pop(unit)
            p.kill()
            p.wait()

    def serving(self):
        try:
            return json.load(open(self.root.at("/var/lib/runsnack/serving.json")))
        except (OSError, ValueError):
            return None

    def mode(self, path):
        st = os.stat(self.root.at(path))
        return st.st_mode & 0o7777, st.st_uid, st.st_gid

    def ids(self, name):
        out = self.root.run(["id", "-u", name]).stdout.strip(), self.root.run(["id", "-g", name]).stdout.strip()
        return int(out[0]), int(out[1])

    # -- the steps --

    def install_previous(self):
        step("dpkg -i " + os.path.basename(self.prev))
        # man-db's trigger rebuilds the whole index; the throwaway root need not.
        if os.path.exists(self.root.at("/var/lib/man-db/auto-update")):
            os.unlink(self.root.at("/var/lib/man-db/auto-update"))
        for user in ("alice", "bob"):
            self.root.run(["useradd", "--create-home", "--shell", "/bin/sh", user])
        self.root.run(["dpkg", "-i", self.prev])
        uid, gid = self.ids("runsnack")
        passwd = self.root.run(["getent", "passwd", "runsnack"]).stdout.strip().split(":")
        check(passwd[5] == "/var/lib/runsnack" and passwd[6] == "/usr/sbin/nologin", "user runsnack: %s" % passwd)
        check(self.mode("/var/lib/runsnack") == (0o3770, uid, gid), "state folder (mode, uid, gid): %o %d %d" % self.mode("/var/lib/runsnack"))
        check(self.mode("/var/lib/runsnack/identity.pem") == (0o600, uid, gid), "identity key mode/owner")
        if not self.old_binary:  # an older runsnack kept it 0600; the upgrade's postinst opens it and fixes that
            check(self.mode("/var/lib/runsnack/runsnack.db")[0] == 0o660, "grants database must be 0660")
        check(self.mode("/etc/runsnack/worker")[0] == 0o750, "worker link folder must be 0750")
        wants = "/etc/systemd/system/multi-user.target.wants/"
        check(os.path.islink(self.root.at(wants + "runsnack-share.service")), "runsnack-share.service is not enabled")
        for unit in ("runsnack-rendezvous.service", "runsnack-pool.service"):
            check(not os.path.lexists(self.root.at(wants + unit)), unit + " must not be enabled")
        for f in ("/usr/share/man/man1/runsnack.1.gz", "/usr/share/man/man1/runsnack-share.1.gz",
                  "/usr/share/man/man1/runsnack-doctor.1.gz", "/usr/share/bash-completion/completions/runsnack",
                  "/usr/share/zsh/vendor-completions/_runsnack", "/usr/share/fish/vendor_completions.d/runsnack.fish",
                  "/usr/share/doc/runsnack/INSTALL.md.gz", "/lib/systemd/system/runsnack-worker@.service",
                  "/etc/default/runsnack"):
            check(os.path.exists(self.root.at(f)), f + " is not installed")
        if self.shim_built:
            for f in ("/usr/lib/runsnack/libcuda.so.1", "/usr/lib/runsnack/libnvidia-ml.so.1"):
                check(os.path.exists(self.root.at(f)), f + " is not installed")
        r = self.root.run(["man", "-l", "--warnings", "-Tutf8", "/usr/share/man/man1/runsnack-share.1.gz"])
        text = re.sub(".\b", "", r.stdout)  # man's bold and underline by overstriking, without a terminal
        check("--serve-only" in text and not r.stderr.strip(), "runsnack-share(1): %s%s" % (text[:2000], r.stderr))

    def verify_units(self):
        step("systemd-analyze verify")
        # A template is verified through an instance of it.
        shutil.copy(self.root.at("/lib/systemd/system/runsnack-worker@.service"),
                    self.root.at("/tmp/runsnack-worker@pkgtest.service"))
        units = ["/lib/systemd/system/runsnack-%s.service" % u for u in ("share", "rendezvous", "pool")]
        r = self.root.run(["systemd-analyze", "verify"] + units + ["/tmp/runsnack-worker@pkgtest.service"], check=False)
        problems = [l for l in (r.stdout + r.stderr).splitlines() if "runsnack" in l]
        check(r.returncode == 0 and not problems, "systemd-analyze verify:\n" + r.stdout + r.stderr)

    def configure(self):
        # What an administrator sets in /etc/default/runsnack; here: loopback only, the network namespace's one address.
        path = self.root.at("/etc/default/runsnack")
        text = open(path).read()
        text = text.replace('RUNSNACK_SHARE_ARGS=""', 'RUNSNACK_SHARE_ARGS="--listen 127.0.0.1"')
        text = text.replace('RUNSNACK_POOL_ARGS="--listen 0.0.0.0:7464"', 'RUNSNACK_POOL_ARGS="--listen 127.0.0.1:7464"')
        open(path, "w").write(text)

    def link_from_an_older_binary(self):
        step("an older runsnack makes the link: a share as user runsnack on the service's address")
        p = subprocess.Popen(self.root.enter() + ["runuser", "-u", "runsnack", "--", "env",
                              "RUNSNACK_HOME=/var/lib/runsnack", "/usr/bin/runsnack", "share", "--json", "--listen",
                              "127.0.0.1", "--allow", "run"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready = json.loads(p.stdout.readline())
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        self.link, self.grant, self.service_peer = ready["link"], ready["grant"], ready["peer"]
        self.start("runsnack-share.service")
        wait_for(lambda: self.root.run(["ss", "-ltn", "sport", "= :7443"]).stdout.count("LISTEN"),
                 "runsnack-share.service to listen")
        self.consumer_checks("before the upgrade")

    def share_service_serves_terminal_links(self):
        step("runsnack-share.service by hand; alice's `runsnack share` is served by it")
        self.start("runsnack-share.service")
        notice = wait_for(self.serving, "runsnack-share.service to serve (serving.json)")
        self.service_peer = notice["peer"]
        self.root.run(["adduser", "alice", "runsnack"])
        # A member administers links but cannot take the key, nor move the service's files (sticky folder).
        r = self.root.run(["cat", "/var/lib/runsnack/identity.pem"], user="alice", check=False)
        check(r.returncode != 0 and "BEGIN" not in r.stdout, "alice could read the service's identity key")
        r = self.root.run(["mv", "/var/lib/runsnack/serving.json", "/var/lib/runsnack/mine"], user="alice", check=False)
        check(r.returncode != 0 and self.serving(), "alice could move the service's serving.json")
        r = self.runsnack(["share", "--json", "--allow", "run", "--label", "pkgtest"], user="alice")
        ready = json.loads(r.stdout.strip().splitlines()[-1])
        check(ready["served_by"] == notice["pid"] and "link" in ready, "share did not hand over: %s" % ready)
        check("/p/" + self.service_peer + "/" in ready["link"], "the link must name the service's PeerId")
        self.link, self.grant = ready["link"], ready["grant"]
        # bob is not in group runsnack: his `links` is his own state, without alice's link.
        r = self.runsnack(["links", "--json"], user="bob")
        check(json.loads(r.stdout) == [], "bob must not see the machine's links: " + r.stdout)
        r = self.runsnack(["links", "--json"])  # root: the machine's state
        check(self.grant in [g["id"] for g in json.loads(r.stdout)], "root's `links` lacks alice's link")
        self.consumer_checks("before the upgrade")

    def consumer_checks(self, when):
        r = self.runsnack(["info", "--json"], user="bob", env={"RUNSNACK_LINK": self.link})
        info = json.loads(r.stdout)
        check(info["provider"] == self.service_peer and info["path"] == "direct", "info %s: %s" % (when, info))
        r = self.runsnack(["run", "--no-sync", "-", "--", "sh", "-c", "echo sandboxed as $(id -u)"], user="bob",
                          stdin=self.link + "\n")  # the link on stdin: a credential stays out of argv
        check("sandboxed as" in r.stdout, "run %s: %s%s" % (when, r.stdout, r.stderr))

    def doctor(self):
        step("runsnack --version and runsnack doctor from /usr/bin")
        r = self.runsnack(["--version"])
        check(r.stdout.strip() == "runsnack " + self.version, "--version: " + r.stdout)
        r = self.runsnack(["doctor", "--json", "--port-range", "7500-7501"], timeout=60)
        report = json.loads(r.stdout)
        checks = {c["name"]: c for c in report["checks"]}
        check(report["ok"], "doctor found failures: %s" % report)
        check(checks["service"]["status"] == "ok" and self.service_peer in checks["service"]["detail"],
              "doctor's service check: %s" % checks["service"])
        check(checks["sandbox (runsnack)"]["status"] == "ok", "the sandbox must work as user runsnack: %s" % checks)
        check("/var/lib/runsnack" in checks["state"]["detail"], "doctor's state check: %s" % checks["state"])

    def pool_with_a_job(self):
        step("runsnack-pool.service by hand: a coordinator with a job in its database")
        self.start("runsnack-pool.service", stdout_file="/var/lib/runsnack/pool/links")
        links_file = self.root.at("/var/lib/runsnack/pool/links")
        text = wait_for(lambda: "submit:" in open(links_file).read() and open(links_file).read(), "the pool's links")
        self.submit = [l.split()[1] for l in text.splitlines() if l.startswith("submit:")][0]
        check(self.mode("/var/lib/runsnack/pool/links")[0] == 0o600, "the pool's links must be readable by root only")
        r = self.runsnack(["pool", "submit", "--json", self.submit, "noop", "--shards", "3"], user="bob")
        self.job = json.loads(r.stdout.strip().splitlines()[-1])["job"]
        self.stop("runsnack-pool.service")
        check(os.path.exists(self.root.at("/var/lib/runsnack/pool/pool.db")), "no pool database")

    def upgrade(self):
        step("dpkg -i %s over %s~prev, with runsnack-share.service live" % (os.path.basename(self.deb), self.version))
        before = open(self.root.at("/var/lib/runsnack/identity.pem"), "rb").read()
        self.root.run(["dpkg", "-i", self.deb])
        r = self.root.run(["dpkg-query", "-W", "-f", "${Version}", "runsnack"])
        check(r.stdout == self.version, "installed version after the upgrade: " + r.stdout)
        check(open(self.root.at("/var/lib/runsnack/identity.pem"), "rb").read() == before, "the upgrade changed the identity")
        check(self.mode("/var/lib/runsnack/runsnack.db")[0] == 0o660, "the upgrade changed the database's mode")
        # What the unit's restart after an upgrade does.
        self.stop("runsnack-share.service")
        self.start("runsnack-share.service")
        wait_for(self.serving, "runsnack-share.service to serve again")
        self.consumer_checks("after the upgrade")
        self.start("runsnack-pool.service", stdout_file="/var/lib/runsnack/pool/links")
        r = wait_for(lambda: (lambda r: r.returncode == 0 and r)(
            self.runsnack(["pool", "jobs", "--json", self.submit], user="bob", check_rc=False)),
            "the coordinator after the upgrade")
        check(self.job in r.stdout, "the job from before the upgrade is gone: " + r.stdout)
        self.stop("runsnack-pool.service")

    def remove_and_purge(self):
        step("dpkg -r keeps the state; dpkg -P removes everything")
        self.root.run(["dpkg", "-r", "runsnack"])
        check(not os.path.exists(self.root.at("/usr/bin/runsnack")), "dpkg -r left /usr/bin/runsnack")
        for f in ("/var/lib/runsnack/runsnack.db", "/var/lib/runsnack/identity.pem", "/var/lib/runsnack/pool/pool.db"):
            check(os.path.exists(self.root.at(f)), "dpkg -r removed " + f)
        check(self.root.run(["getent", "passwd", "runsnack"], check=False).returncode == 0, "dpkg -r removed the user")
        self.root.run(["dpkg", "-P", "runsnack"])
        for name in ("passwd", "group"):
            check(self.root.run(["getent", name, "runsnack"], check=False).returncode != 0,
                  "dpkg -P left the %s entry runsnack" % name)
        ignored = ("/var/log/", "/var/lib/dpkg/", "/var/cache/", "/home/", "/tmp/", "/etc/passwd", "/etc/group",
                   "/etc/shadow", "/etc/gshadow", "/etc/subuid", "/etc/subgid", "/var/lib/man-db/", "/etc/.pwd.lock")
        left = [p for p in self.root.changes() if "runsnack" in p and not p.startswith(ignored)]
        check(not left, "dpkg -P left: %s" % left)
        r = self.root.run(["grep", "-l", "runsnack", "/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"],
                          check=False)
        check(r.stdout.strip() == "", "user or group runsnack left in " + r.stdout)


def inside(deb, prev, version, shim_built, old_binary):
    from throwaway_root import ThrowawayRoot
    root = ThrowawayRoot()
    scenario = Scenario(root, deb, prev, version, shim_built, old_binary)
    try:
        scenario.install_previous()
        scenario.verify_units()
        scenario.configure()
        if scenario.old_binary:
            scenario.link_from_an_older_binary()
        else:
            scenario.share_service_serves_terminal_links()
        scenario.pool_with_a_job()
        scenario.upgrade()
        scenario.doctor()  # with runsnack-share.service still serving
        scenario.stop("runsnack-share.service")
        scenario.remove_and_purge()
    except BaseException:
        for name in sorted(os.listdir(scenario.logs)):
            print("---- %s ----\n%s" % (name, open(os.path.join(scenario.logs, name), errors="replace").read()[-4000:]))
        raise
    finally:
        scenario.stop_all()
        root.close()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--inside":
        inside(*sys.argv[2:5], shim_built=sys.argv[5] == "1", old_binary=sys.argv[6] == "1")
        return 0
    args = sys.argv[1:]
    previous_binary = None
    if len(args) == 3 and args[1] == "--previous-binary":
        previous_binary = os.path.abspath(args[2])
    elif len(args) != 1:
        print("usage: test_package.py BUILD_DIR [--previous-binary FILE]", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("skipped: the package test installs into a throwaway root and needs root", file=sys.stderr)
        return SKIP
    for tool in ("dpkg-buildpackage", "dh", "lintian", "unshare", "systemd-analyze"):
        if not shutil.which(tool):
            print("missing %s: run scripts/install-deps" % tool, file=sys.stderr)
            return 1
    # A container without CAP_SYS_ADMIN cannot make the throwaway root: a missing precondition.
    r = subprocess.run(["unshare", "--mount", "--net", "--", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("skipped: no mount and network namespaces here (%s)" % r.stderr.strip(), file=sys.stderr)
        return SKIP
    build_dir = os.path.abspath(args[0])
    out = tempfile.mkdtemp(prefix="runsnack-pkgtest-")
    started = time.monotonic()
    try:
        deb, prev, version = build_packages(build_dir, out, previous_binary)
        shim = "1" if os.path.exists(os.path.join(build_dir, "cuda-shim", "libcuda.so.1")) else "0"
        r = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private", "--", sys.executable,
                            os.path.abspath(__file__), "--inside", deb, prev, version, shim,
                            "1" if previous_binary else "0"])
        if r.returncode != 0:
            return 1
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("package test passed in %.0f s" % (time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
