"""runsnack run / cp end to end: sync, sandbox, streaming, signals, limits, bad input."""

import glob
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import unittest

from harness import BIN, E2ETestCase, CMD_TIMEOUT, read_terminal


class RunBase(E2ETestCase):
    def setup_pair(self, *share_args):
        self.phome, self.chome = self.new_home("provider"), self.new_home("consumer")
        self.provider = self.start_provider(self.phome, "--allow", "run,cp", *share_args)
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work, exist_ok=True)
        self.cli_cwd = self.work  # cp uses the workspace `run --sync work` syncs to
        quota_link = self.provider.link if "--disk-quota" in share_args else None
        self.workspace = self.workspace_dir(self.phome, self.chome, self.work, quota_link)

    def write(self, rel, data):
        path = os.path.join(self.work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return path

    def run_remote(self, *cmd, extra=(), **kw):
        return self.run_cli(self.chome, "run", self.provider.link, *extra, "--sync", self.work, "--", *cmd, **kw)

    def start_run(self, *cmd, extra=()):
        return self.start(self.chome, "run", self.provider.link, *extra, "--sync", self.work, "--", *cmd, name="run")

    def wait_line(self, proc, text, deadline=30):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if any(text in l for l in proc.lines):
                return
            if not proc.alive() and proc.popen.poll() is not None and not any(text in l for l in proc.lines):
                time.sleep(0.2)
                if not any(text in l for l in proc.lines):
                    self.fail("run exited before %r: %r %s" % (text, proc.lines, proc.stderr()))
            time.sleep(0.05)
        self.fail("no %r from run within %ss: %r %s" % (text, deadline, proc.lines, proc.stderr()))

    def part_bytes(self):
        """Bytes in the provider's `.runsnack-part-*` temporary file (0 while there is none): a file arriving."""
        try:
            names = os.listdir(self.workspace)
        except OSError:  # the workspace is made by the first sync
            return 0
        for name in names:
            if name.startswith(".runsnack-part-"):
                try:
                    return os.path.getsize(os.path.join(self.workspace, name))
                except OSError:  # renamed into place meanwhile
                    pass
        return 0

    def procs_with(self, marker):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
        return found


class Basics(RunBase):
    def test_exit_status_output_and_pull(self):
        self.setup_pair()
        self.write("hello.txt", "hi there\n")
        cp = self.run_remote("sh", "-c", "cat hello.txt; echo oops >&2; mkdir -p out; echo result > out/r.txt; exit 7",
                             extra=("--pull", "out"))
        self.assertEqual(cp.returncode, 7, cp.stderr)
        self.assertIn("hi there", cp.stdout)
        self.assertIn("oops", cp.stderr)
        with open(os.path.join(self.work, "out", "r.txt")) as f:
            self.assertEqual(f.read(), "result\n")
        events = self.audit(self.phome)
        ends = [e for e in events if e["kind"] == "run_end"]
        self.assertEqual(len(ends), 1, events)
        self.assertEqual(ends[0]["detail"]["exit_status"], 7)
        self.assertIn("cat hello.txt", ends[0]["detail"]["command"])
        for key in ("peak_memory_bytes", "cpu_user_s", "cpu_sys_s", "seconds"):
            self.assertIn(key, ends[0]["detail"])
        self.assertTrue([e for e in events if e["kind"] == "run_start"])

    def test_missing_command_exits_127_in_one_line(self):
        self.setup_pair()
        self.write("script.sh", "#!/bin/sh\necho hi\n")  # no x bit
        os.chmod(self.write("ok.sh", "#!/bin/sh\necho hi\n"), 0o755)
        for cmd, status, words in ((["no-such-command-runsnack", "--flag"], 127, "command not found on the provider"),
                                   (["./missing.sh"], 127, "command not found on the provider"),
                                   (["./script.sh"], 126, "not executable on the provider")):
            with self.subTest(cmd[0]):
                cp = self.run_remote(*cmd)
                self.assertEqual(cp.returncode, status, cp.stderr)
                lines = [l for l in cp.stderr.splitlines() if cmd[0] in l]
                self.assertEqual(len(lines), 1, cp.stderr)
                self.assertTrue(lines[0].startswith("runsnack: %s: %s" % (cmd[0], words)), cp.stderr)
                self.assertNotIn("bwrap", cp.stderr)
        # A real command is unaffected, and so is an executable script of the workspace.
        cp = self.run_remote("./ok.sh")
        self.assertEqual((cp.returncode, cp.stdout), (0, "hi\n"), cp.stderr)

    def test_streaming_first_line_before_end(self):
        self.setup_pair()
        proc = self.start_run("sh", "-c", "echo first; sleep 4; echo second")
        start = time.monotonic()
        self.wait_line(proc, "first", deadline=20)
        self.assertTrue(proc.alive(), "the command should still be running")
        self.assertNotIn("second", proc.lines)
        self.assertEqual(proc.wait(30), 0)
        self.assertIn("second", proc.lines)
        self.assertGreater(time.monotonic() - start, 2)

    def test_runsnack_link_for_run_and_cp(self):
        """LINK may be left out with RUNSNACK_LINK: after `--` is always the command, so its first
        word is never taken for the link; cp takes [LINK] SRC DST."""
        self.setup_pair()
        env = {"RUNSNACK_LINK": self.provider.link}
        self.write("in.txt", "payload\n")
        cp = self.run_cli(self.chome, "run", "--sync", self.work, "--", "cat", "in.txt", env_extra=env)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout, "payload\n")
        cp = self.run_cli(self.chome, "run", "--no-sync", "--", "echo", "hi", env_extra=env)
        self.assertEqual((cp.returncode, cp.stdout), (0, "hi\n"), cp.stderr)
        # Words after `--` stay the command even when one is itself `--`.
        cp = self.run_cli(self.chome, "run", self.provider.link, "--no-sync", "--", "echo", "--", "x")
        self.assertEqual((cp.returncode, cp.stdout), (0, "-- x\n"), cp.stderr)
        # cp with two words: LINK from the environment.
        cp = self.run_cli(self.chome, "cp", os.path.join(self.work, "in.txt"), "remote:copied.txt", env_extra=env)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        with open(os.path.join(self.workspace, "copied.txt")) as f:
            self.assertEqual(f.read(), "payload\n")
        # Usage errors say what to do, with exit status 2.
        cp = self.run_cli(self.chome, "run", "--no-sync", env_extra=env)
        self.assertEqual(cp.returncode, 2, cp.stderr)
        self.assertIn("runsnack run [LINK] -- CMD", cp.stderr)
        cp = self.run_cli(self.chome, "run", self.provider.link, "echo", "--", "hi")
        self.assertEqual(cp.returncode, 2, cp.stderr)
        self.assertIn("only LINK goes before --", cp.stderr)
        # Without RUNSNACK_LINK, an omitted LINK is an error that says how to give one.
        self.fails(self.chome, "run", "--no-sync", "--", "true", contains="RUNSNACK_LINK")

    def test_not_allowed_without_grant(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome)
        self.fails(chome, "run", provider.link, "--no-sync", "--", "true", contains="does not allow")


class Signals(RunBase):
    def test_ctrl_c_reaches_remote(self):
        self.setup_pair()
        proc = self.start_run("sh", "-c", "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.1; done")
        self.wait_line(proc, "ready")
        proc.signal(signal.SIGINT)
        self.assertEqual(proc.wait(20), 5, proc.stderr())
        self.assertIn("got-int", proc.lines)

    def test_second_ctrl_c_kills(self):
        self.setup_pair()
        proc = self.start_run("sh", "-c", "trap '' INT; echo ready; sleep 4711")
        self.wait_line(proc, "ready")
        proc.signal(signal.SIGINT)
        time.sleep(1.0)
        self.assertTrue(proc.alive(), "a command that ignores SIGINT keeps running after the first Ctrl-C")
        self.assertTrue(self.procs_with("4711"))
        proc.signal(signal.SIGINT)
        self.assertEqual(proc.wait(20), 137, proc.stderr())
        self.poll_until(lambda: not self.procs_with("sleep\x004711"), 3, "the remote processes gone")

    def test_disconnect_kills_processes_keeps_workspace(self):
        self.setup_pair()
        self.write("keep.txt", "keep")
        proc = self.start_run("sh", "-c", "echo ready; sleep 4712")
        self.wait_line(proc, "ready")
        self.assertTrue(self.procs_with("sleep\x004712"))
        proc.signal(signal.SIGKILL)
        start = time.monotonic()
        self.poll_until(lambda: not self.procs_with("sleep\x004712"), 5, "remote processes gone", interval=0.05)
        self.assertLess(time.monotonic() - start, 3)
        self.assertTrue(os.path.exists(os.path.join(self.workspace, "keep.txt")))


class Sync(RunBase):
    def test_only_changed_files_travel(self):
        self.setup_pair()
        for i in range(20):
            self.write("src/f%d.txt" % i, "content %d\n" % i * 100)
        self.write(".gitignore", "*.log\nbuild/\n")
        self.write("debug.log", "noise")
        self.write("build/x.o", "obj")
        cp = self.run_remote("sh", "-c", "ls; ls src | wc -l")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("sync: 21 of", cp.stderr)  # 20 files + .gitignore
        self.assertNotIn("debug.log", cp.stdout)
        self.assertNotIn("build", cp.stdout)
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertNotIn("sync:", cp.stderr)  # nothing changed: nothing sent
        self.write("src/f3.txt", "changed")
        cp = self.run_remote("cat", "src/f3.txt")
        self.assertIn("sync: 1 of", cp.stderr)
        self.assertEqual(cp.stdout, "changed")
        syncs = [e for e in self.audit(self.phome) if e["kind"] == "sync"]
        self.assertEqual([s["detail"]["files"] for s in syncs], [21, 0, 1])

    def test_deleted_files_disappear_remote_outputs_stay(self):
        self.setup_pair()
        self.write("a.txt", "a")
        self.write("b.txt", "b")
        self.write("dir/c.txt", "c")
        self.write("gone/d.txt", "d")
        cp = self.run_remote("sh", "-c", "echo out > made.txt; echo r > dir/remote.txt")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        os.remove(os.path.join(self.work, "b.txt"))
        os.remove(os.path.join(self.work, "dir", "c.txt"))
        os.remove(os.path.join(self.work, "gone", "d.txt"))
        os.rmdir(os.path.join(self.work, "gone"))
        cp = self.run_remote("sh", "-c", "ls -R")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("4 deleted", cp.stderr)  # b.txt, dir/c.txt, gone/d.txt and then the empty "gone"
        for path in ("b.txt", "dir/c.txt", "gone"):
            self.assertFalse(os.path.exists(os.path.join(self.workspace, path)), path)
        for path in ("a.txt", "made.txt", "dir/remote.txt"):  # what commands wrote stays
            self.assertTrue(os.path.exists(os.path.join(self.workspace, path)), path)
        other = os.path.join(self.tmp, "other.txt")
        with open(other, "w") as f:
            f.write("o")
        self.ok(self.chome, "cp", self.provider.link, other, "remote:")  # cp is no sync: deletes nothing
        self.assertTrue(os.path.exists(os.path.join(self.workspace, "a.txt")))

    def test_symlink_swapped_in_during_sync_never_leads_outside(self):
        # A remote command keeps replacing the folder sub/ with a symlink to a folder of the
        # provider's outside the workspace while syncs write into sub/: nothing may land there.
        self.setup_pair()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        for i in range(200):
            self.write("sub/f%d.txt" % i, "v0 %d" % i)
        self.assertEqual(self.run_remote("true").returncode, 0)
        swapper = self.start(self.chome, "run", self.provider.link, "--no-sync", "--", "sh", "-c",
                             "while :; do rm -rf sub; ln -s %s sub; rm -f sub; mkdir sub; done" % outside,
                             name="swapper")
        try:
            time.sleep(0.5)
            for round in range(1, 4):
                for i in range(200):
                    self.write("sub/f%d.txt" % i, "v%d %d" % (round, i))
                self.run_remote("true")  # may fail when sub/ is a symlink at the wrong moment
                self.assertTrue(swapper.alive(), swapper.stderr())  # it was swapping all along
        finally:
            swapper.signal(signal.SIGKILL)
            swapper.wait(10)
        self.assertEqual(os.listdir(outside), [])

    def test_newly_ignored_files_stay_remote(self):
        # Like rsync's --delete, which leaves excluded files: ignoring a file stops its sync, it does
        # not delete the provider's copy. A file deleted locally and not ignored still goes.
        self.setup_pair()
        self.write("keep.log", "k")
        self.write("cache/x.bin", "x")
        self.write("drop.txt", "d")
        self.assertEqual(self.run_remote("true").returncode, 0)
        self.write(".gitignore", "*.log\ncache/\n")
        os.remove(os.path.join(self.work, "drop.txt"))
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("1 deleted", cp.stderr)
        for path in ("keep.log", "cache/x.bin"):
            self.assertTrue(os.path.exists(os.path.join(self.workspace, path)), path)
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "drop.txt")))

    def test_workspace_change_seen_on_unchanged_resync(self):
        self.setup_pair()
        self.write("a.txt", "original")
        cp = self.run_remote("sh", "-c", "printf tampered > a.txt")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        cp = self.run_remote("cat", "a.txt")  # nothing changed locally: the workspace must still be put right
        self.assertEqual(cp.stdout, "original", cp.stderr)
        self.assertIn("sync: 1 of", cp.stderr)
        cp = self.run_remote("cat", "a.txt")
        self.assertEqual(cp.stdout, "original", cp.stderr)
        self.assertNotIn("sync:", cp.stderr)

    def test_large_file_changed_in_place_sends_only_changed_chunks(self):
        self.setup_pair()
        data = bytearray(os.urandom(24 * 1024 * 1024))  # many chunks either side of the change
        self.write("model.bin", bytes(data))
        cp = self.run_remote("true", extra=("--json",))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        at = 12 * 1024 * 1024 + 100 * 1024  # 1 MiB, not chunk-aligned, in the middle
        data[at:at + 1024 * 1024] = os.urandom(1024 * 1024)
        self.write("model.bin", bytes(data))
        cp = self.run_remote("sha256sum", "model.bin", extra=("--json",))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        stats = [e for e in (json.loads(l) for l in cp.stderr.splitlines() if l.startswith("{"))
                 if e.get("event") == "sync"][-1]
        self.assertEqual(stats["files"], 1)
        self.assertLessEqual(stats["bytes"], 2 * 1024 * 1024)  # 5 chunks of 256 KiB at most
        self.assertGreaterEqual(stats["reused_bytes"], len(data) - 2 * 1024 * 1024)
        self.assertIn(hashlib.sha256(bytes(data)).hexdigest(), cp.stdout)

    def test_symlink_outside_travels_as_a_symlink(self):
        # As rsync -a or a docker build context: a symlink that points outside the project is sent
        # as a symlink and resolves in the sandbox (its read-only system), never on the provider's host.
        self.setup_pair()
        self.write("ok.txt", "ok")
        os.symlink("/etc/passwd", os.path.join(self.work, "evil"))
        os.symlink("ok.txt", os.path.join(self.work, "fine"))
        cp = self.run_remote("sh", "-c", "readlink evil; cat fine")
        self.assertEqual((cp.returncode, cp.stdout), (0, "/etc/passwd\nok"), cp.stderr)
        self.assertEqual(os.readlink(os.path.join(self.workspace, "evil")), "/etc/passwd")
        self.assertTrue(os.path.islink(os.path.join(self.workspace, "fine")))

    def test_file_bigger_than_quota(self):
        self.setup_pair("--disk-quota", "64K")
        self.write("big.bin", os.urandom(200 * 1024))
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 1)
        self.assertIn("quota", cp.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "big.bin")))

    def test_interrupted_sync_completes_next_time(self):
        self.setup_pair()
        data = os.urandom(24 * 1024 * 1024)
        self.write("big.bin", data)
        self.write("small.txt", "s")
        proc = self.start_run("true")
        # Cut once big.bin is arriving (its temporary file holds bytes), not after a fixed sleep that
        # a fast machine outruns and a slow one spends before the sync has started.
        self.poll_until(lambda: self.part_bytes() > 0 or not proc.alive(), 60, "big.bin arriving", interval=0.005)
        self.assertTrue(proc.alive(), "run finished before it could be cut off; make the file bigger")
        proc.signal(signal.SIGKILL)
        proc.wait(10)
        big = os.path.join(self.workspace, "big.bin")
        if os.path.exists(big):  # never a half-written file under its real name
            with open(big, "rb") as f:
                self.assertEqual(f.read(), data)
        cp = self.run_remote("sha256sum", "big.bin")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn(hashlib.sha256(data).hexdigest(), cp.stdout)
        leftovers = [n for n in os.listdir(self.workspace) if n.startswith(".runsnack-part-")]
        self.assertEqual(leftovers, [])

    def test_file_changed_while_sent_is_refused_and_never_lands(self):
        self.setup_pair()
        path = self.write("big.bin", os.urandom(32 * 1024 * 1024))
        stop = threading.Event()

        def scribble():  # rewrites the first block every 2 ms: the file never holds still
            fd = os.open(path, os.O_WRONLY)
            try:
                while not stop.is_set():
                    os.pwrite(fd, os.urandom(4096), 0)
                    time.sleep(0.002)
            finally:
                os.close(fd)

        t = threading.Thread(target=scribble)
        t.start()
        try:
            cp = self.run_remote("true")
        finally:
            stop.set()
            t.join()
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn("changed while it was being sent", cp.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "big.bin")))
        self.assertEqual([n for n in os.listdir(self.workspace) if n.startswith(".runsnack-part-")], [])
        with open(path, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        cp = self.run_remote("sha256sum", "big.bin")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn(want, cp.stdout)


class Sandbox(RunBase):
    def test_provider_home_and_state_invisible(self):
        self.setup_pair()
        cp = self.run_remote("sh", "-c", "ls %s; ls /root; cat %s/identity.pem; echo done" % (self.phome, self.phome))
        self.assertIn("done", cp.stdout)
        self.assertNotIn("BEGIN", cp.stdout)
        self.assertIn("No such file", cp.stderr)
        self.assertNotIn("runsnack.db", cp.stdout)

    def test_cannot_write_outside_workspace(self):
        self.setup_pair()
        marker = os.path.join(self.tmp, "escaped")
        cp = self.run_remote("sh", "-c", "touch /usr/escaped; touch %s; echo x > /tmp/t && echo tmp-ok; echo ws > w.txt"
                             % marker)
        self.assertFalse(os.path.exists("/usr/escaped"))
        self.assertFalse(os.path.exists(marker))
        self.assertIn("tmp-ok", cp.stdout)  # a private /tmp
        self.assertTrue(os.path.exists(os.path.join(self.workspace, "w.txt")))

    def test_cannot_signal_provider(self):
        self.setup_pair()
        cp = self.run_remote("sh", "-c", "kill -9 %d; echo rc=$?" % self.provider.pid)
        self.assertIn("rc=1", cp.stdout, cp.stderr)
        self.assertTrue(self.provider.alive())
        self.info(self.chome, self.provider.link)

    def network_probe(self, *share_args):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        threading.Thread(target=lambda: srv.accept(), daemon=True).start()
        self.setup_pair(*share_args)
        cp = self.run_remote("python3", "-c", "import socket; socket.create_connection(('127.0.0.1', %d), 3); "
                             "print('connected')" % port)
        srv.close()
        return cp

    def test_no_network_unless_allowed(self):
        cp = self.network_probe()
        self.assertNotIn("connected", cp.stdout)
        self.assertNotEqual(cp.returncode, 0)

    def test_network_when_allowed(self):
        cp = self.network_probe("--network")
        self.assertIn("connected", cp.stdout, cp.stderr)

    def test_fork_bomb_bounded(self):
        self.setup_pair("--max-procs", "20", "--run-timeout", "20s")
        script = ("import os, time\nn = 0\n"
                  "while n < 200:\n"
                  "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
                  "    if pid == 0:\n        time.sleep(5); os._exit(0)\n"
                  "    n += 1\n"
                  "print('forked', n, flush=True)\n")
        self.write("bomb.py", script)
        cp = self.run_remote("python3", "bomb.py")
        forked = [l for l in cp.stdout.splitlines() if l.startswith("forked")]
        self.assertTrue(forked, cp.stdout + cp.stderr)
        self.assertLess(int(forked[0].split()[1]), 20)
        self.assertTrue(self.provider.alive())

    def spare_groups(self):
        """The provider's spare cgroups (launch.cpp, `runsnack-spare-PID-N`) as {N: processes in it}."""
        groups = {}
        for pattern in ("/sys/fs/cgroup/runsnack-spare-%d-*", "/sys/fs/cgroup/*/runsnack-spare-%d-*"):
            for path in glob.glob(pattern % self.provider.pid):
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        groups[int(path.rsplit("-", 1)[1])] = len(f.read().split())
                except OSError:  # removed meanwhile
                    pass
        return groups

    def test_each_command_leaves_a_spare_made_after_it_ends(self):
        # A provider keeps one process ready in a cgroup of its own for the next command. The
        # command that takes it has the next one made once it is over: made at once, its fork
        # would run beside the command on its way to the exit status.
        if os.geteuid() != 0 or not (os.path.isdir("/sys/fs/cgroup/pids") or os.path.exists("/sys/fs/cgroup/cgroup.controllers")):
            self.skipTest("spare processes need root and cgroups")
        self.setup_pair()
        ready = lambda: [n for n, procs in self.spare_groups().items() if procs == 1]
        self.poll_until(ready, 10, "the first spare, made when share starts")
        first = max(ready())
        proc = self.start_run("sh", "-c", "echo running; sleep 2")
        self.wait_line(proc, "running")
        during = self.spare_groups()
        self.assertEqual(max(during), first, "no new spare while the command that took it runs: %r" % during)
        self.assertGreater(during[first], 1, "the command runs in the spare's group: %r" % during)
        self.assertEqual(proc.wait(20), 0, proc.stderr())
        self.poll_until(lambda: [n for n in ready() if n > first], 10, "the next spare, once the command ended")
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.poll_until(lambda: [n for n in ready() if n > first + 1], 10, "a spare after each command")

    def test_timeout(self):
        self.setup_pair("--run-timeout", "2s")
        start = time.monotonic()
        cp = self.run_remote("sleep", "30")
        self.assertEqual(cp.returncode, 137, cp.stderr)
        self.assertIn("stopped at its 2 s time limit", cp.stderr)
        self.assertLess(time.monotonic() - start, 20)


class Cp(RunBase):
    def test_put_and_get_folder(self):
        self.setup_pair()
        self.write("data/a.txt", "A")
        self.write("data/sub/b.txt", "B" * 100000)
        self.ok(self.chome, "cp", self.provider.link, os.path.join(self.work, "data"), "remote:inputs/")
        self.assertTrue(os.path.exists(os.path.join(self.workspace, "inputs", "data", "sub", "b.txt")))
        dest = os.path.join(self.tmp, "back")
        os.makedirs(dest)
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs", dest + "/")
        with open(os.path.join(dest, "inputs", "data", "sub", "b.txt")) as f:
            self.assertEqual(f.read(), "B" * 100000)
        again = self.ok(self.chome, "cp", self.provider.link, "remote:inputs", dest + "/")
        self.assertIn("cp: 0 files", again.stderr)  # resume: what is there already is not sent again

    def test_progress_at_a_terminal_shows_rate_and_time(self):
        self.setup_pair()
        src = self.write("big.bin", os.urandom(24 * 1024 * 1024))
        # stderr on a terminal: the progress bar is drawn there, only there.
        master, slave = os.openpty()
        proc = subprocess.Popen([BIN, "cp", self.provider.link, src, "remote:"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=slave, env=self.env(self.chome, None))
        os.close(slave)
        try:
            shown = read_terminal(master, proc, deadline=CMD_TIMEOUT)
            proc.wait(timeout=CMD_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
        text = shown.decode(errors="replace")
        self.assertEqual(proc.returncode, 0, text)
        final = [l for l in text.replace("\r", "\n").splitlines() if "100%" in l]
        self.assertTrue(final, text)
        # e.g. "sync [#########################] 100% 24.0 MiB of 24.0 MiB, 61.2 MiB/s in 0:00"
        self.assertRegex(final[-1], r"24\.0 MiB of 24\.0 MiB, [0-9.]+ (KiB|MiB)/s in [0-9]+:[0-9]{2}")
        self.assertIn("cp: 1 files", text)

    def test_cp_resumes_within_a_large_file_after_a_cut(self):
        self.setup_pair()
        data = os.urandom(96 * 1024 * 1024)  # cut at 16 MiB: most of it still to send
        src = self.write("big.bin", data)
        proc = self.start(self.chome, "cp", self.provider.link, src, "remote:", name="cp")

        end = time.monotonic() + 60
        while self.part_bytes() < 16 * 1024 * 1024 and proc.alive() and time.monotonic() < end:
            time.sleep(0.005)
        self.assertTrue(proc.alive(), "cp finished before it could be cut off; make the file bigger")
        proc.signal(signal.SIGKILL)  # the connection drops mid-file
        proc.wait(10)
        self.assertFalse(os.path.exists(os.path.join(self.workspace, "big.bin")))  # never half written
        kept = self.poll_until(lambda: [n for n in os.listdir(self.workspace) if n.startswith(".runsnack-part-resume-")],
                               10, "the provider keeping the prefix")
        self.assertEqual(len(kept), 1)
        prefix = os.path.getsize(os.path.join(self.workspace, kept[0]))
        cp = self.ok(self.chome, "cp", self.provider.link, src, "remote:", "--json")
        stats = json.loads(cp.stdout)
        self.assertGreaterEqual(stats["reused_bytes"], 8 * 1024 * 1024)  # the verified prefix did not travel again
        self.assertLessEqual(stats["bytes"], len(data) - stats["reused_bytes"])
        self.assertLess(stats["bytes"], len(data) - prefix // 2)
        with open(os.path.join(self.workspace, "big.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), hashlib.sha256(data).hexdigest())
        self.assertEqual([n for n in os.listdir(self.workspace) if n.startswith(".runsnack-part-")], [])

    def test_traversal_refused(self):
        self.setup_pair()
        src = self.write("x.txt", "x")
        for dst in ("remote:../evil", "remote:/tmp/evil", "remote:a/../../evil/"):
            self.fails(self.chome, "cp", self.provider.link, src, dst)
        self.assertFalse(os.path.exists(os.path.join(self.phome, "workspaces", "evil")))
        self.assertFalse(os.path.exists("/tmp/evil"))



class CpPaths(RunBase):
    """What users type: nested paths both ways, trailing slashes, several sources, and the
    workspace's bounds on each of them (issue 17)."""

    def ws(self, rel):
        return os.path.join(self.workspace, rel)

    def read(self, path):
        with open(path) as f:
            return f.read()

    def put_inputs(self):
        """inputs/data/nums.txt, inputs/data/deep/d.txt and inputs/top.txt in the workspace."""
        src = os.path.join(self.tmp, "seed", "inputs")
        for rel, text in (("data/nums.txt", "1 2 3\n"), ("data/deep/d.txt", "D\n"), ("top.txt", "T\n")):
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            with open(os.path.join(src, rel), "w") as f:
                f.write(text)
        self.ok(self.chome, "cp", self.provider.link, src, "remote:")
        self.assertEqual(self.read(self.ws("inputs/data/nums.txt")), "1 2 3\n")

    def test_get_nested_file_and_folder(self):
        self.setup_pair()
        self.put_inputs()
        dest = os.path.join(self.tmp, "dest")
        os.makedirs(dest)
        # A file two folders deep lands by its own name, without the folders above it.
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/data/nums.txt", dest)
        self.assertEqual(self.read(os.path.join(dest, "nums.txt")), "1 2 3\n")
        self.assertFalse(os.path.exists(os.path.join(dest, "inputs")))
        # A nested folder, whole, by its own name.
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/data", dest + "/")
        self.assertEqual(self.read(os.path.join(dest, "data", "deep", "d.txt")), "D\n")
        self.assertEqual(self.read(os.path.join(dest, "data", "nums.txt")), "1 2 3\n")
        # A new name for a nested file and for a nested folder.
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/data/nums.txt", os.path.join(dest, "n.txt"))
        self.assertEqual(self.read(os.path.join(dest, "n.txt")), "1 2 3\n")
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/data/deep", os.path.join(dest, "renamed"))
        self.assertEqual(self.read(os.path.join(dest, "renamed", "d.txt")), "D\n")
        # A symlink on the way that stays inside the workspace is followed.
        os.symlink("inputs/data", self.ws("current"))
        self.ok(self.chome, "cp", self.provider.link, "remote:current/deep/d.txt", os.path.join(dest, "via-link.txt"))
        self.assertEqual(self.read(os.path.join(dest, "via-link.txt")), "D\n")
        # A source that is itself a symlink travels as one; where it would point outside the
        # destination, the error says how to copy what it points to, and that works.
        os.symlink("data", self.ws("inputs/same"))
        os.symlink("../inputs/data", self.ws("inputs/cur"))
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/same", dest)
        self.assertEqual(os.readlink(os.path.join(dest, "same")), "data")
        self.fails(self.chome, "cp", self.provider.link, "remote:inputs/cur", dest, contains="'inputs/cur/'")
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/cur/", dest)
        self.assertEqual(self.read(os.path.join(dest, "cur", "nums.txt")), "1 2 3\n")
        # What is not there says so.
        self.fails(self.chome, "cp", self.provider.link, "remote:inputs/nope/x.txt", dest, contains="no such")

    def test_put_nested_destination(self):
        self.setup_pair()
        x = self.write("x.txt", "X\n")
        folder = os.path.dirname(self.write("folder/in.txt", "I\n"))
        self.ok(self.chome, "cp", self.provider.link, x, "remote:a/b/")
        self.assertEqual(self.read(self.ws("a/b/x.txt")), "X\n")
        self.ok(self.chome, "cp", self.provider.link, x, "remote:a/b/y.txt")
        self.assertEqual(self.read(self.ws("a/b/y.txt")), "X\n")
        self.ok(self.chome, "cp", self.provider.link, folder, "remote:a/b/c/")
        self.assertEqual(self.read(self.ws("a/b/c/folder/in.txt")), "I\n")
        # An existing remote folder receives the source by name, as cp does.
        self.ok(self.chome, "cp", self.provider.link, x, "remote:a/b")
        self.assertEqual(self.read(self.ws("a/b/x.txt")), "X\n")
        self.ok(self.chome, "cp", self.provider.link, folder, "remote:a")
        self.assertEqual(self.read(self.ws("a/folder/in.txt")), "I\n")
        # Through a symlink that stays inside the workspace.
        os.symlink("a/b", self.ws("bee"))
        self.ok(self.chome, "cp", self.provider.link, x, "remote:bee/z.txt")
        self.assertEqual(self.read(self.ws("a/b/z.txt")), "X\n")

    def test_trailing_slashes_both_sides(self):
        self.setup_pair()
        self.put_inputs()
        data = os.path.dirname(self.write("data/f.txt", "F\n"))
        # Local source with a trailing slash: the folder itself goes, by name.
        self.ok(self.chome, "cp", self.provider.link, data + "/", "remote:in/")
        self.assertEqual(self.read(self.ws("in/data/f.txt")), "F\n")
        # Remote source with a trailing slash, into a local folder given with one (created).
        dst = os.path.join(self.tmp, "dst")
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/data/", dst + "/")
        self.assertEqual(self.read(os.path.join(dst, "data", "nums.txt")), "1 2 3\n")
        self.ok(self.chome, "cp", self.provider.link, "remote:in/", dst + "/")
        self.assertEqual(self.read(os.path.join(dst, "in", "data", "f.txt")), "F\n")
        # An existing local folder without a slash receives by name too.
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/top.txt", dst)
        self.assertEqual(self.read(os.path.join(dst, "top.txt")), "T\n")
        # A trailing slash on a remote path that is a file is refused, as cp does.
        self.fails(self.chome, "cp", self.provider.link, "remote:inputs/top.txt/", dst, contains="not a folder")

    def test_several_sources_both_directions(self):
        self.setup_pair()
        self.put_inputs()
        a = self.write("a.txt", "A\n")
        folder = os.path.dirname(self.write("dir/b.txt", "B\n"))
        self.ok(self.chome, "cp", self.provider.link, a, folder + "/", "remote:inputs/")
        self.assertEqual(self.read(self.ws("inputs/a.txt")), "A\n")
        self.assertEqual(self.read(self.ws("inputs/dir/b.txt")), "B\n")
        dst = os.path.join(self.tmp, "dst")
        self.ok(self.chome, "cp", self.provider.link, "remote:inputs/top.txt", "remote:inputs/data/", "remote:inputs/dir",
                dst + "/")
        self.assertEqual(self.read(os.path.join(dst, "top.txt")), "T\n")
        self.assertEqual(self.read(os.path.join(dst, "data", "deep", "d.txt")), "D\n")
        self.assertEqual(self.read(os.path.join(dst, "dir", "b.txt")), "B\n")
        # With RUNSNACK_LINK, LINK is left out for several sources too.
        env = {"RUNSNACK_LINK": self.provider.link}
        self.ok(self.chome, "cp", a, folder, "remote:env/", env_extra=env)
        self.assertEqual(self.read(self.ws("env/dir/b.txt")), "B\n")
        self.ok(self.chome, "cp", "remote:inputs/top.txt", "remote:env/a.txt", dst, env_extra=env)
        self.assertEqual(self.read(os.path.join(dst, "a.txt")), "A\n")
        # Several sources need a folder destination; a mix of sides is refused.
        self.fails(self.chome, "cp", self.provider.link, a, folder, "remote:inputs/top.txt", contains="folder")
        self.fails(self.chome, "cp", self.provider.link, "remote:inputs/top.txt", "remote:inputs/data",
                   os.path.join(self.tmp, "new-file"), contains="folder")
        self.fails(self.chome, "cp", self.provider.link, a, "remote:inputs/top.txt", dst + "/", contains="remote:")

    def test_escaping_paths_refused_with_audit(self):
        self.setup_pair()
        self.put_inputs()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "secret"), "w") as f:
            f.write("provider secret\n")
        os.symlink(outside, self.ws("link"))           # absolute, leads out
        os.symlink("../../../outside", self.ws("inputs/up"))  # relative, leads out
        os.symlink("inputs/up", self.ws("chain"))      # inside itself, then out
        dest = os.path.join(self.tmp, "dest")
        os.makedirs(dest)
        for src in ("remote:link/secret", "remote:inputs/up/secret", "remote:chain/secret", "remote:link"):
            with self.subTest(src):
                self.fails(self.chome, "cp", self.provider.link, src, dest + "/", contains="outside the workspace")
        for src in ("remote:a/../../x", "remote:/etc/passwd"):
            with self.subTest(src):
                self.fails(self.chome, "cp", self.provider.link, src, dest + "/", contains="refused path")
        self.assertEqual(os.listdir(dest), [])
        # The other way: nothing is written through the link.
        x = self.write("x.txt", "X\n")
        self.fails(self.chome, "cp", self.provider.link, x, "remote:link/", contains="outside the workspace")
        self.fails(self.chome, "cp", self.provider.link, x, "remote:chain/x.txt", contains="outside the workspace")
        self.assertEqual(sorted(os.listdir(outside)), ["secret"])
        # run --pull is held to the same.
        cp = self.run_remote("true", extra=("--no-sync", "--pull", "link/secret"))
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("outside the workspace", cp.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, "link")))
        events = self.audit(self.phome)
        refused = [e for e in events if e["decision"] == "refuse" and e["kind"] in ("cp_get", "cp_put", "pull")]
        reasons = " ".join(e["reason"] for e in refused)
        self.assertGreaterEqual(len(refused), 9, events)
        self.assertIn("outside the workspace", reasons)
        self.assertIn("'..'", reasons)

    def test_chmod_only_change_is_synced(self):
        self.setup_pair()
        script = self.write("script.sh", "#!/bin/sh\necho ran\n")
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertFalse(os.stat(self.ws("script.sh")).st_mode & 0o100)
        os.chmod(script, 0o755)
        cp = self.run_remote("./script.sh")
        self.assertEqual((cp.returncode, cp.stdout), (0, "ran\n"), cp.stderr)
        self.assertTrue(os.stat(self.ws("script.sh")).st_mode & 0o100)
        os.chmod(script, 0o644)
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertFalse(os.stat(self.ws("script.sh")).st_mode & 0o100)
        # The other way: a mode the command changed comes back with --pull and cp.
        cp = self.run_remote("chmod", "+x", "script.sh", extra=("--no-sync", "--pull", "script.sh"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertTrue(os.stat(script).st_mode & 0o100)
        dest = os.path.join(self.tmp, "dest")
        self.ok(self.chome, "cp", self.provider.link, "remote:script.sh", dest + "/")
        self.run_remote("chmod", "-x", "script.sh", extra=("--no-sync",))
        self.ok(self.chome, "cp", self.provider.link, "remote:script.sh", dest + "/")
        self.assertFalse(os.stat(os.path.join(dest, "script.sh")).st_mode & 0o100)


class Pull(RunBase):
    def test_pull_trailing_slash_and_nested_paths(self):
        self.setup_pair()
        cmd = "mkdir -p out/sub other/deep; echo r > out/r.txt; echo s > out/sub/file.txt; echo o > other/deep/o.txt"
        cp = self.run_remote("sh", "-c", cmd, extra=("--pull", "out/", "--pull", "other/deep/o.txt"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        # Relative to the local folder, as in the workspace.
        with open(os.path.join(self.work, "out", "sub", "file.txt")) as f:
            self.assertEqual(f.read(), "s\n")
        with open(os.path.join(self.work, "other", "deep", "o.txt")) as f:
            self.assertEqual(f.read(), "o\n")
        os.remove(os.path.join(self.work, "out", "sub", "file.txt"))
        cp = self.run_remote("true", extra=("--no-sync", "--pull", "out/sub/file.txt"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        with open(os.path.join(self.work, "out", "sub", "file.txt")) as f:
            self.assertEqual(f.read(), "s\n")

    def test_bad_pull_path_refused_before_the_command_runs(self):
        self.setup_pair()
        for bad in ("../x", "/etc/passwd", "a/../../x"):
            with self.subTest(bad):
                cp = self.run_remote("sh", "-c", "echo ran", extra=("--no-sync", "--pull", bad))
                self.assertEqual(cp.returncode, 2, cp.stderr)
                self.assertIn("--pull", cp.stderr)
                self.assertNotIn("ran", cp.stdout)


class RemoteOutputs(RunBase):
    """Issue 39 item 10: what a command writes stays in the remote workspace unless --pull brings it back. One
    line at the end says so, naming the files (with --json: a field of the exit line instead); not with --pull,
    and not when the command changed nothing."""

    def hint_lines(self, stderr):
        return [l for l in stderr.splitlines() if "changed in the remote workspace" in l]

    def exit_event(self, stderr):
        events = [json.loads(l) for l in stderr.splitlines() if l.startswith("{")]
        exits = [e for e in events if e.get("event") == "exit"]
        self.assertEqual(len(exits), 1, stderr)
        return exits[0]

    def test_changed_files_are_named_without_pull(self):
        self.setup_pair()
        self.write("in.txt", "input\n")
        self.write("same.txt", "untouched\n")
        cp = self.run_remote("sh", "-c", "echo 1 > out.csv; mkdir -p models; echo 2 > models/model.pt; "
                                         "echo 3 >> in.txt; cat same.txt")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        lines = self.hint_lines(cp.stderr)
        self.assertEqual(lines, ["runsnack: 3 files changed in the remote workspace (in.txt, models/model.pt, "
                                 "out.csv) and stay there: add --pull PATH to bring them here, or `runsnack cp LINK "
                                 "remote:PATH .`"], cp.stderr)
        # Many: counted, a few named.
        cp = self.run_remote("sh", "-c", "mkdir -p many; for i in $(seq 1 30); do echo $i > many/f$i; done")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        lines = self.hint_lines(cp.stderr)
        self.assertEqual(len(lines), 1, cp.stderr)
        self.assertTrue(lines[0].startswith("runsnack: 30 files changed in the remote workspace (many/f"), lines)
        self.assertIn(", ...)", lines[0])
        # --json: a field of the exit line, and no sentence.
        cp = self.run_remote("sh", "-c", "echo 4 > out.csv; exit 3", extra=("--json",))
        self.assertEqual(cp.returncode, 3, cp.stderr)
        self.assertEqual(self.hint_lines(cp.stderr), [], cp.stderr)
        ev = self.exit_event(cp.stderr)
        self.assertEqual(ev["status"], 3)
        self.assertEqual(ev["changed"], {"files": 1, "paths": ["out.csv"], "complete": True})

    def test_no_line_with_pull_or_when_nothing_changed(self):
        self.setup_pair()
        self.write("in.txt", "input\n")
        cp = self.run_remote("sh", "-c", "mkdir -p out; echo r > out/r.txt", extra=("--pull", "out", "--json"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(self.hint_lines(cp.stderr), [], cp.stderr)
        with open(os.path.join(self.work, "out", "r.txt")) as f:
            self.assertEqual(f.read(), "r\n")
        self.assertEqual(self.exit_event(cp.stderr)["changed"], {"files": 1, "paths": ["out/r.txt"], "complete": True})
        # Nothing changed (the files the sync wrote do not count).
        self.write("in2.txt", "more input\n")
        cp = self.run_remote("cat", "in.txt", "in2.txt", extra=("--json",))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(self.hint_lines(cp.stderr), [], cp.stderr)
        self.assertEqual(self.exit_event(cp.stderr)["changed"], {"files": 0, "paths": [], "complete": True})
        cp = self.run_remote("cat", "in.txt")
        self.assertEqual((cp.returncode, self.hint_lines(cp.stderr)), (0, []), cp.stderr)


class Budget(RunBase):
    def test_cpu_budget_stops_command_and_expires_link(self):
        self.setup_pair("--cpu-hours", "0.0003")  # about 1.1 s of CPU
        start = time.monotonic()
        cp = self.run_remote("sh", "-c", "echo spinning; while :; do :; done", timeout=60)
        self.assertEqual(cp.returncode, 137, cp.stderr)
        self.assertIn("spinning", cp.stdout)
        self.assertIn("usage budget spent", cp.stderr)
        self.assertLess(time.monotonic() - start, 30)
        ends = [e for e in self.audit(self.phome) if e["kind"] == "run_end"]
        self.assertIn("usage budget spent", ends[-1]["reason"])
        again = self.run_cli(self.chome, "run", self.provider.link, "--no-sync", "--", "true")
        self.assertEqual(again.returncode, 1, again.stderr)
        self.assertTrue("usage budget spent" in again.stderr or "expired" in again.stderr, again.stderr)

    def test_budget_not_spent_runs(self):
        self.setup_pair("--cpu-hours", "1")
        cp = self.run_remote("sh", "-c", "echo ok")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 0, cp.stderr)


class Workspaces(RunBase):
    """A workspace per project folder (or --workspace NAME); `runsnack workspaces` lists and removes them."""

    def project(self, name, files):
        folder = os.path.join(self.tmp, name)
        for rel, text in files.items():
            path = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return folder

    def run_in(self, folder, *cmd, extra=()):
        return self.run_cli(self.chome, "run", self.provider.link, *extra, "--sync", folder, "--", *cmd)

    def listed(self):
        out = json.loads(self.ok(self.chome, "workspaces", self.provider.link, "--json").stdout)
        return {w["name"]: w for w in out["workspaces"]}, out

    def test_two_project_folders_keep_their_files(self):
        self.setup_pair()
        one = self.project("proj", {"a.txt": "a", "src/m.py": "m"})
        two = self.project("other", {"b.txt": "b"})
        cp = self.run_in(one, "sh", "-c", "ls -R; echo made > out.txt")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertRegex(cp.stderr, r"sync: 2 of 3 entries sent to workspace proj-[0-9a-f]{8}")  # the user sees which
        cp = self.run_in(two, "ls")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout.split(), ["b.txt"])
        self.assertNotIn("deleted", cp.stderr)
        cp = self.run_in(one, "ls")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(sorted(cp.stdout.split()), ["a.txt", "out.txt", "src"])
        self.assertNotIn("sync:", cp.stderr)  # unchanged: its own sync state was kept
        for folder in (one, two):
            self.assertTrue(os.path.isdir(self.workspace_dir(self.phome, self.chome, folder)), folder)
        # cp in a project folder reaches that folder's workspace.
        self.cli_cwd = one
        dest = os.path.join(self.tmp, "dest")
        self.ok(self.chome, "cp", self.provider.link, "remote:out.txt", dest)
        with open(dest) as f:
            self.assertEqual(f.read(), "made\n")
        self.cli_cwd = two
        line = self.fails(self.chome, "cp", self.provider.link, "remote:out.txt", dest + "2", contains="no such")
        self.assertIn("workspace other-", line)
        self.assertIn("--workspace", line)
        names, out = self.listed()
        self.assertEqual(out["this_folder"], os.path.basename(self.workspace_dir(self.phome, self.chome, two)))
        self.assertEqual(set(names), {os.path.basename(self.workspace_dir(self.phome, self.chome, f)) for f in (one, two)})
        syncs = [e for e in self.audit(self.phome) if e["kind"] == "sync"]
        self.assertEqual([s["detail"]["workspace"].split("-")[0] for s in syncs], ["proj", "other", "proj"])

    def test_named_workspace_listed_copied_and_removed(self):
        self.setup_pair()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "keep.txt"), "w") as f:
            f.write("keep")
        deep = "/".join(["d"] * 200)
        cmd = ("head -c 1048576 /dev/urandom > big && ln -s %s escape && mkdir -p %s && echo x > %s/x && "
               "mkdir ro && touch ro/f && chmod 500 ro" % (outside, deep, deep))
        cp = self.run_remote("sh", "-c", cmd, extra=("--no-sync", "--workspace", "exp1"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        names, out = self.listed()
        self.assertIn("exp1", names)
        self.assertGreaterEqual(names["exp1"]["bytes"], 1048576)
        self.assertFalse(names["exp1"]["in_use"])
        self.assertTrue(names["exp1"]["last_used"].endswith("Z"))
        table = self.ok(self.chome, "workspaces", self.provider.link).stdout
        self.assertRegex(table, r"(?m)^exp1\s+\d\.\d MiB\s+\d{4}-\d\d-\d\dT")
        got = os.path.join(self.tmp, "big")
        self.ok(self.chome, "cp", "--workspace", "exp1", self.provider.link, "remote:big", got)
        self.assertEqual(os.path.getsize(got), 1048576)
        done = json.loads(self.ok(self.chome, "workspaces", self.provider.link, "--remove", "exp1", "--json").stdout)
        self.assertEqual(done, {"removed": ["exp1"]})
        names, _ = self.listed()
        self.assertNotIn("exp1", names)
        self.assertFalse(os.path.exists(self.workspace_dir(self.phome, self.chome, "exp1")))
        self.assertEqual(os.listdir(outside), ["keep.txt"])  # the symlink was removed, not followed
        consumer_dir = os.path.dirname(self.workspace)
        self.assertFalse([n for n in os.listdir(consumer_dir) if n.startswith(".removing-")], os.listdir(consumer_dir))
        removes = [e for e in self.audit(self.phome) if e["kind"] == "workspace_remove"]
        self.assertEqual([(e["decision"], e["detail"]["name"]) for e in removes], [("accept", "exp1")])
        self.fails(self.chome, "workspaces", self.provider.link, "--remove", "exp1", contains="no workspace")
        for bad in ("../x", ".hidden", "a/b", "x" * 65):
            with self.subTest(bad):
                cp = self.run_cli(self.chome, "workspaces", self.provider.link, "--remove", bad)
                self.assertEqual(cp.returncode, 2, cp.stderr)
                self.assertIn("bad workspace name", cp.stderr)
                cp = self.run_remote("true", extra=("--no-sync", "--workspace", bad))
                self.assertEqual(cp.returncode, 1, cp.stderr)
                self.assertIn("bad workspace name", cp.stderr)

    def test_a_workspace_in_use_is_not_removed(self):
        self.setup_pair()
        proc = self.start_run("sh", "-c", "echo ready; sleep 4713", extra=("--no-sync", "--workspace", "busy"))
        self.wait_line(proc, "ready")
        self.fails(self.chome, "workspaces", self.provider.link, "--remove", "busy", contains="a command is running")
        names, _ = self.listed()
        self.assertTrue(names["busy"]["in_use"])
        proc.signal(signal.SIGKILL)
        self.poll_until(lambda: not self.procs_with("sleep\x004713"), 30, "the remote command to end")
        self.poll_until(lambda: self.run_cli(self.chome, "workspaces", self.provider.link, "--remove", "busy").returncode == 0,
                        30, "the workspace to be removable")
        self.assertNotIn("busy", self.listed()[0])

    def test_an_earlier_single_workspace_becomes_default(self):
        self.setup_pair()
        # What a provider of an earlier version left: the files directly in the consumer's folder.
        consumer_dir = os.path.dirname(self.workspace)
        os.makedirs(os.path.join(consumer_dir, "default"))
        for rel, text in (("old.txt", "old"), ("default/inner.txt", "inner")):
            with open(os.path.join(consumer_dir, rel), "w") as f:
                f.write(text)
        cp = self.run_remote("sh", "-c", "cat old.txt default/inner.txt", extra=("--no-sync", "--workspace", "default"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout, "oldinner")
        self.assertEqual(set(self.listed()[0]), {"default"})



def sync_lines(stderr, start):
    """The lines of a run's stderr that start with `start` (e.g. "sync: skipped")."""
    return [l for l in stderr.splitlines() if l.startswith(start)]


class ProjectFolders(RunBase):
    """Issue 39, item 1: a project folder runs as it is (virtualenv, symlinks out of it, FIFOs,
    unreadable files, symlink loops); what is not sent is said in one line."""

    def test_virtualenv_project_runs_as_it_is(self):
        self.setup_pair()
        self.write("train.py", "import sys\nprint('trained', sys.prefix != sys.base_prefix)\n")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", os.path.join(self.work, ".venv")], check=True)
        self.assertEqual(os.readlink(os.path.join(self.work, ".venv", "bin", "python3")), "/usr/bin/python3")
        self.write("pkg/__init__.py", "")
        self.write("pkg/__pycache__/__init__.cpython-311.pyc", b"\0" * 64)
        self.write("web/node_modules/left-pad/index.js", "module.exports = 1\n")
        cp = self.run_remote("python3", "train.py")
        self.assertEqual((cp.returncode, cp.stdout), (0, "trained False\n"), cp.stderr)
        # The heavy folders stay here, said in one line.
        notes = sync_lines(cp.stderr, "sync: not sent")
        self.assertEqual(len(notes), 1, cp.stderr)
        for word in (".venv (a virtualenv)", "node_modules", "__pycache__", ".runsnackignore"):
            self.assertIn(word, notes[0])
        for rel in (".venv", "pkg/__pycache__", "web/node_modules"):
            self.assertFalse(os.path.lexists(os.path.join(self.workspace, rel)), rel)
        self.assertTrue(os.path.exists(os.path.join(self.workspace, "pkg", "__init__.py")))
        # Sent when asked: its python3 is a symlink to /usr/bin/python3, which resolves in the sandbox.
        self.write(".runsnackignore", "!.venv/\n")
        cp = self.run_remote(".venv/bin/python3", "train.py")
        self.assertEqual((cp.returncode, cp.stdout), (0, "trained True\n"), cp.stderr)
        self.assertEqual(os.readlink(os.path.join(self.workspace, ".venv", "bin", "python3")), "/usr/bin/python3")
        self.assertTrue(os.path.isfile(os.path.join(self.workspace, ".venv", "pyvenv.cfg")))
        self.assertFalse([l for l in sync_lines(cp.stderr, "sync: not sent") if ".venv" in l], cp.stderr)

    @unittest.skipUnless(os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv"),
                         "needs root and setpriv: root without CAP_DAC_OVERRIDE is what cannot read a 000 file")
    def test_outside_links_fifos_unreadable_files_and_loops_do_not_stop_the_sync(self):
        self.setup_pair()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "thing"), "w") as f:
            f.write("outside\n")
        self.write("ok.txt", "ok\n")
        links = {"abs": "/etc/hostname", "up": "../outside/thing", "dangling": "/nonexistent/runsnack",
                 "data": outside, "loop": "loop", "a": "b", "b": "a"}
        for name, target in links.items():
            os.symlink(target, os.path.join(self.work, name))
        os.mkfifo(os.path.join(self.work, "f"))
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.path.join(self.work, "sock"))
        os.chmod(self.write("secret.txt", "secret\n"), 0)
        self.write("private/inner.txt", "inner\n")
        os.chmod(os.path.join(self.work, "private"), 0)
        show = "for n in abs up dangling data; do echo \"$n=$(readlink $n)\"; done; cat ok.txt up; ls -A | sort | tr '\\n' ' '"
        # The consumer as root without the capabilities that let root read every file.
        drop = ["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search"]
        argv = drop + [BIN, "run", self.provider.link, "--sync", self.work, "--", "sh", "-c", show]
        cp = subprocess.run(argv, input="", capture_output=True, text=True, env=self.env(self.chome), timeout=CMD_TIMEOUT)
        self._stderrs.append(("run as root without dac_override", cp.stderr))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        for name in ("abs", "up", "dangling", "data"):
            self.assertIn("%s=%s\n" % (name, links[name]), cp.stdout)
            self.assertEqual(os.readlink(os.path.join(self.workspace, name)), links[name])
        self.assertIn("ok\n", cp.stdout)
        self.assertNotIn("outside", cp.stdout.splitlines())  # ../outside resolves in the sandbox, not on the host
        listed = cp.stdout.strip().splitlines()[-1].split()
        self.assertEqual(listed, ["abs", "dangling", "data", "ok.txt", "private", "up"])
        skipped = sync_lines(cp.stderr, "sync: skipped")
        self.assertEqual(len(skipped), 1, cp.stderr)
        for word in ("skipped 7 entries", "secret.txt (permission denied)", "f (a FIFO)", "sock (a socket)",
                     "loop (a symlink loop)", "a (a symlink loop)", "b (a symlink loop)", "private/ (permission denied)"):
            self.assertIn(word, skipped[0])
        self.assertEqual(os.listdir(os.path.join(self.workspace, "private")), [])
        # A symlink to a folder outside, replaced here by a real folder: the sync makes it a folder
        # and writes nothing through the old symlink.
        os.remove(os.path.join(self.work, "data"))
        self.write("data/x.txt", "x\n")
        cp = self.run_remote("cat", "data/x.txt")
        self.assertEqual((cp.returncode, cp.stdout), (0, "x\n"), cp.stderr)
        self.assertEqual(os.listdir(outside), ["thing"])
        self.assertFalse(os.path.islink(os.path.join(self.workspace, "data")))


class Stdin(RunBase):
    """Issue 39, item 5: stdin reaches the command, as with ssh and `docker run -i`."""

    def run_piped(self, data, *cmd, extra=(), timeout=CMD_TIMEOUT):
        argv = [BIN, "run", self.provider.link, *extra, "--sync", self.work, "--", *cmd]
        cp = subprocess.run(argv, input=data, capture_output=True, env=self.env(self.chome), timeout=timeout)
        self._stderrs.append(("runsnack run %s" % " ".join(cmd), cp.stderr.decode("utf-8", "replace")))
        return cp

    def test_piped_stdin_reaches_the_command_with_its_end(self):
        self.setup_pair()
        cp = self.run_piped(b"x\n", "cat")
        self.assertEqual((cp.returncode, cp.stdout), (0, b"x\n"), cp.stderr)
        cp = self.run_piped(b"a\nb\nc\n", "wc", "-l")
        self.assertEqual((cp.returncode, cp.stdout.strip()), (0, b"3"), cp.stderr)
        cp = self.run_piped(b"", "cat")  # an empty stdin is an end at once
        self.assertEqual((cp.returncode, cp.stdout), (0, b""), cp.stderr)
        with open(os.devnull, "rb") as null:  # `< /dev/null`
            cp = subprocess.run([BIN, "run", self.provider.link, "--sync", self.work, "--", "cat"], stdin=null,
                                capture_output=True, env=self.env(self.chome), timeout=CMD_TIMEOUT)
        self.assertEqual((cp.returncode, cp.stdout), (0, b""), cp.stderr)
        # --no-stdin: the command reads an empty stdin whatever this one is (ssh -n).
        cp = self.run_piped(b"x\n", "cat", extra=("--no-stdin",))
        self.assertEqual((cp.returncode, cp.stdout), (0, b""), cp.stderr)

    def test_a_megabyte_of_stdin_round_trips_exactly(self):
        self.setup_pair()
        data = os.urandom(1 << 20)
        cp = self.run_piped(data, "cat")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(len(cp.stdout), len(data))
        self.assertEqual(hashlib.sha256(cp.stdout).hexdigest(), hashlib.sha256(data).hexdigest())
        cp = self.run_piped(data, "sha256sum")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())

    def test_a_command_that_never_reads_stdin_does_not_wait_for_it(self):
        self.setup_pair()
        cp = self.run_piped(os.urandom(1 << 20), "true")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        # A stdin that never ends (a pipe whose writer stays): the command's end is the run's.
        argv = [BIN, "run", self.provider.link, "--sync", self.work, "--", "sh", "-c", "echo done"]
        read_end, write_end = os.pipe()
        os.write(write_end, b"unread\n" * 1000)
        proc = subprocess.Popen(argv, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env(self.chome))
        os.close(read_end)
        try:
            out, err = proc.communicate(timeout=CMD_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.fail("run waited for a stdin its command never reads: %r" % err)
        finally:
            os.close(write_end)  # only now: the pipe's writer stayed all along
        self.assertEqual((proc.returncode, out), (0, b"done\n"), err)

    def test_ctrl_c_reaches_a_command_behind_stdin_it_does_not_read(self):
        # stdin travels within windows the provider grants: a signal never waits behind input.
        self.setup_pair()
        argv = [BIN, "run", self.provider.link, "--sync", self.work, "--", "sh", "-c",
                "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.1; done"]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env(self.chome), start_new_session=True)

        def feed():  # an endless stdin, as `yes |` is
            try:
                while True:
                    proc.stdin.write(b"y\n" * 32768)
            except (OSError, ValueError):
                pass

        threading.Thread(target=feed, daemon=True).start()
        try:
            shown = read_terminal(proc.stdout.fileno(), proc, until=b"ready", deadline=CMD_TIMEOUT)
            self.assertIn(b"ready", shown, proc.stderr.read() if proc.poll() is not None else b"")
            os.kill(proc.pid, signal.SIGINT)
            self.assertEqual(proc.wait(30), 5)
            shown += proc.stdout.read()
            self.assertIn(b"got-int", shown)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass

    def test_a_terminal_stays_interactive(self):
        # With a terminal as stdin nothing is forwarded (the command's stdin is empty) and Ctrl-C
        # interrupts the remote command, as before.
        self.setup_pair()
        master, slave = os.openpty()
        argv = [BIN, "run", self.provider.link, "--sync", self.work, "--", "sh", "-c",
                "cat; trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.1; done"]
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=self.env(self.chome),
                                start_new_session=True)
        os.close(slave)
        try:
            shown = read_terminal(master, proc, until=b"ready", deadline=CMD_TIMEOUT)
            self.assertIn(b"ready", shown)
            os.kill(proc.pid, signal.SIGINT)
            shown += read_terminal(master, proc, deadline=30)
            self.assertEqual(proc.wait(30), 5, proc.stderr.read())
            self.assertIn(b"got-int", shown)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)


class LimitsExplained(RunBase):
    """Issue 39, item 4: a command stopped by a limit says which, as the time limit did: on the consumer's terminal,
    in --json and in the audit record. On main a command killed at the memory limit ended with 137 and nothing."""

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0 or not (os.path.isdir("/sys/fs/cgroup/pids") or
                                     os.path.exists("/sys/fs/cgroup/cgroup.controllers")):
            self.skipTest("limits held by a cgroup need root and cgroups")

    @staticmethod
    def json_lines(text):
        return [json.loads(l) for l in text.splitlines() if l.startswith("{")]

    def test_out_of_memory_is_said_with_the_limit(self):
        self.setup_pair("--memory", "100M")
        cp = self.run_remote("python3", "-c", "x = bytearray(400 << 20)", extra=("--json",))
        self.assertEqual(cp.returncode, 137, cp.stderr)
        self.assertIn("runsnack: out of memory: the link allows 100 MB per command", cp.stderr)
        end = [e for e in self.json_lines(cp.stderr) if e.get("event") == "exit"]
        self.assertEqual(len(end), 1, cp.stderr)
        self.assertEqual(end[0]["status"], 137)
        self.assertTrue(end[0]["reason"].startswith("out of memory: the link allows 100 MB"), end[0])
        ends = [e for e in self.audit(self.phome) if e["kind"] == "run_end"]
        self.assertTrue(ends[-1]["reason"].startswith("out of memory: the link allows 100 MB"), ends[-1])
        # Under the limit: nothing said.
        cp = self.run_remote("python3", "-c", "x = bytearray(10 << 20); print('ok')")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertNotIn("memory", cp.stderr)

    def test_the_process_limit_is_said_with_the_limit(self):
        self.setup_pair("--max-procs", "20")
        cp = self.run_remote("sh", "-c", "for i in $(seq 40); do sleep 1 & done; wait")
        self.assertNotEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("the process limit was reached: the link allows 20 processes per command", cp.stderr)
        ends = [e for e in self.audit(self.phome) if e["kind"] == "run_end"]
        self.assertIn("the process limit was reached", ends[-1]["reason"])

    def test_a_spent_budget_is_said_in_json_too(self):
        self.setup_pair("--cpu-hours", "0.0003")  # about 1.1 s of CPU
        cp = self.run_remote("sh", "-c", "while :; do :; done", extra=("--json",), timeout=60)
        self.assertEqual(cp.returncode, 137, cp.stderr)
        self.assertIn("runsnack: usage budget spent", cp.stderr)
        end = [e for e in self.json_lines(cp.stderr) if e.get("event") == "exit"]
        self.assertEqual(len(end), 1, cp.stderr)
        self.assertIn("usage budget spent", end[0]["reason"])


    def test_over_the_disk_quota_workspaces_are_still_listed_and_removed(self):
        """A link whose files no longer fit its quota (set or lowered after they were written): on main every
        `workspaces` and `--remove` failed with mkfs.ext4's own words (__populate_fs: Could not allocate block)."""
        self.setup_pair("--disk-quota", "10M")
        old = os.path.join(self.consumer_folder(self.phome, self.chome, self.provider.link), "old-1234abcd")
        os.makedirs(old)
        with open(os.path.join(old, "blob"), "wb") as f:
            f.write(os.urandom(15 * 1024 * 1024))
        cp = self.run_remote("true")
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("more than its 10 MB disk quota: list them with `runsnack workspaces LINK`", cp.stderr)
        self.assertNotIn("mkfs", cp.stderr)
        self.assertNotIn("populate", cp.stderr)
        listed = self.ok(self.chome, "workspaces", self.provider.link)
        self.assertIn("old-1234abcd", listed.stdout)
        self.assertIn("over it", listed.stdout)
        self.ok(self.chome, "workspaces", self.provider.link, "--remove", "old-1234abcd")
        cp = self.run_remote("sh", "-c", "echo back")
        self.assertEqual((cp.returncode, cp.stdout.strip()), (0, "back"), cp.stderr)


if __name__ == "__main__":
    unittest.main()
