"""`runsnack doctor` on this machine (issue 17): what works, what does not, and the fix for each."""

import json
import os
import shutil
import socket
import subprocess
import unittest

from harness import BIN, E2ETestCase, Proc, Provider, free_port


class DoctorTest(E2ETestCase):
    def doctor(self, home, *args, rc=0):
        cp = self.run_cli(home, "doctor", "--json", *args, timeout=60)
        self.assertEqual(cp.returncode, rc, "doctor: rc=%d stdout=%r stderr=%r" % (cp.returncode, cp.stdout, cp.stderr))
        report = json.loads(cp.stdout)
        self.assertEqual(report["ok"], rc == 0)
        for c in report["checks"]:
            self.assertIn(c["status"], ("ok", "warn", "fail", "skip"), c)
            if c["status"] in ("warn", "fail") and c["name"] not in ("service",):
                self.assertTrue(c["fix"], "a %s check must say what to do: %s" % (c["status"], c))
        return {c["name"]: c for c in report["checks"]}

    def test_this_machine(self):
        home = self.new_home()
        checks = self.doctor(home)
        # GPU: what `runsnack gpus` sees, with a fix when there is none (the CI machines have none).
        gpus = json.loads(self.ok(home, "gpus", "--json").stdout)["gpus"]
        if gpus:
            self.assertEqual(checks["gpu"]["status"], "ok")
            self.assertIn(gpus[0]["name"], checks["gpu"]["detail"])
        else:
            self.assertEqual(checks["gpu"]["status"], "warn")
            self.assertIn("no NVIDIA GPU", checks["gpu"]["detail"])
            self.assertIn("nvidia-driver", checks["gpu"]["fix"])
        # bubblewrap is installed here (scripts/install-deps) and runs the real sandbox policy.
        self.assertTrue(os.path.exists("/usr/bin/bwrap"))
        self.assertEqual(checks["sandbox"]["status"], "ok", checks["sandbox"])
        self.assertIn("bubblewrap", checks["sandbox"]["detail"])
        self.assertIn(home, checks["state"]["detail"])
        self.assertIn(checks["ports"]["status"], ("ok",))
        # TCP Fast Open: what this kernel's sysctl says (Debian's default, 1, asks but does not serve).
        with open("/proc/sys/net/ipv4/tcp_fastopen") as f:
            fast_open = int(f.read())
        self.assertEqual(checks["fast open"]["status"], "ok" if fast_open & 3 == 3 else "warn", checks["fast open"])
        if fast_open & 2 == 0:
            self.assertIn("net.ipv4.tcp_fastopen=3", checks["fast open"]["fix"])
        # --disk-quota: an ext4 image as root; a user without fuse2fs or /dev/fuse is told how to get one.
        if os.geteuid() == 0:
            self.assertEqual(checks["disk quota"]["status"], "ok", checks["disk quota"])
            self.assertIn("ext4 image", checks["disk quota"]["detail"])
        # No UPnP/NAT-PMP router answers on this network: a result and the way around it.
        self.assertEqual(checks["router"]["status"], "warn", checks["router"])
        self.assertIn("rendezvous", checks["router"]["fix"])
        self.assertEqual(checks["nat"]["status"], "skip")
        self.assertNotIn("link", checks)

    def test_human_output_names_problems_and_fixes(self):
        home = self.new_home()
        cp = self.run_cli(home, "doctor", "--no-port-mapping", timeout=60)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        lines = cp.stdout.splitlines()
        self.assertTrue(lines[0].startswith("runsnack "), lines[0])
        self.assertTrue(any(l.startswith("ok    sandbox") for l in lines), cp.stdout)
        self.assertTrue(any(l.startswith("skip  router") and "--no-port-mapping" in l for l in lines), cp.stdout)
        self.assertTrue(any(l.strip().startswith("fix: ") for l in lines), cp.stdout)
        self.assertIn("nothing broken", lines[-1])

    def test_disk_quota_without_fuse_says_why_and_the_fix(self):
        if os.geteuid() != 0 or (os.stat("/dev/fuse").st_mode & 0o006) == 0o006:
            self.skipTest("needs root, and /dev/fuse closed to users (as in CI's container)")
        home = self.new_home()
        os.chmod(home, 0o777)
        cp = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BIN, "doctor", "--json",
                             "--no-port-mapping"], capture_output=True, text=True, env=self.env(home), timeout=60)
        checks = {c["name"]: c for c in json.loads(cp.stdout)["checks"]}
        self.assertEqual(checks["disk quota"]["status"], "warn", checks["disk quota"])
        self.assertIn("/dev/fuse is closed to this user", checks["disk quota"]["detail"])
        self.assertIn("fuse2fs", checks["disk quota"]["fix"])

    def test_disk_quota_under_no_new_privs_names_the_namespace_mounter(self):
        # The Debian unit's provider: an ordinary user with NoNewPrivileges, so the setuid fusermount3 cannot mount.
        if os.geteuid() != 0 or not os.access("/usr/bin/fuse2fs", os.X_OK):
            self.skipTest("needs root (to open /dev/fuse to users for the test) and fuse2fs")
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs"]
        if subprocess.run(user + ["unshare", "--user", "--mount", "true"], capture_output=True).returncode != 0:
            self.skipTest("user namespaces are closed to an ordinary user here")
        mode = os.stat("/dev/fuse").st_mode & 0o777
        self.addCleanup(os.chmod, "/dev/fuse", mode)
        os.chmod("/dev/fuse", 0o666)
        home = self.new_home()
        os.chmod(home, 0o777)
        cp = subprocess.run(user + [BIN, "doctor", "--json", "--no-port-mapping"], capture_output=True, text=True,
                            env=self.env(home), timeout=60)
        checks = {c["name"]: c for c in json.loads(cp.stdout)["checks"]}
        self.assertEqual(checks["disk quota"]["status"], "ok", checks["disk quota"])
        self.assertIn("namespace of its own", checks["disk quota"]["detail"])
        self.assertIn("no_new_privs", checks["disk quota"]["detail"])

    def test_port_range_in_use_fails_with_the_fix(self):
        home = self.new_home()
        with socket.socket() as held:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            held.bind(("0.0.0.0", 0))
            held.listen()
            port = held.getsockname()[1]
            checks = self.doctor(home, "--no-port-mapping", "--port-range", "%d-%d" % (port, port), rc=1)
        self.assertEqual(checks["ports"]["status"], "fail")
        self.assertIn("--port-range", checks["ports"]["fix"])

    def test_nat_through_a_rendezvous(self):
        home = self.new_home()
        rdv = Proc(self, ["rendezvous", "--listen", "127.0.0.1:0", "--json"], self.new_home(), name="rdv")
        ready = rdv.wait_for(lambda e: e.get("event") == "ready", 30, "the rendezvous")
        port = int(ready["listen"].rsplit(":", 1)[1])
        checks = self.doctor(home, "--no-port-mapping", "--rendezvous", "127.0.0.1:%d" % port)
        self.assertEqual(checks["nat"]["status"], "ok", checks["nat"])
        self.assertIn("no NAT", checks["nat"]["detail"])
        # The same setting from the state folder's config.json, as share reads it.
        with open(os.path.join(home, "config.json"), "w") as f:
            json.dump({"rendezvous": "127.0.0.1:%d" % port}, f)
        self.assertEqual(self.doctor(home, "--no-port-mapping")["nat"]["status"], "ok")
        # A rendezvous that is not there: a failure that says what to check.
        dead = free_port()
        checks = self.doctor(home, "--no-port-mapping", "--rendezvous", "127.0.0.1:%d" % dead, rc=1)
        self.assertEqual(checks["nat"]["status"], "fail")
        self.assertIn("runsnack rendezvous", checks["nat"]["fix"])

    def test_link_path_and_a_dead_link(self):
        provider_home, home = self.new_home("provider"), self.new_home("consumer")
        provider = Provider(self, provider_home, ["--no-port-mapping"])
        checks = self.doctor(home, "--no-port-mapping", provider.link)
        self.assertEqual(checks["link"]["status"], "ok", checks["link"])
        for part in ("direct via 127.0.0.1:%d" % provider.port, "rtt", "bandwidth", "allows info"):
            self.assertIn(part, checks["link"]["detail"])
        provider.stop()
        checks = self.doctor(home, "--no-port-mapping", "--timeout", "3", provider.link, rc=1)
        self.assertEqual(checks["link"]["status"], "fail")
        self.assertIn("runsnack share", checks["link"]["fix"])


if __name__ == "__main__":
    unittest.main()
