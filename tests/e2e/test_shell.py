"""runsnack shell end to end, driven through tmux: a real terminal, keys, resizes."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import unittest

from harness import BIN, E2ETestCase

TMUX = shutil.which("tmux")


@unittest.skipUnless(TMUX, "tmux is not installed (scripts/install-deps installs it)")
class Shell(E2ETestCase):
    def setUp(self):
        super().setUp()
        self.socket = "runsnack-e2e-%d-%d" % (os.getpid(), id(self))
        conf = os.path.join(self.tmp, "tmux.conf")
        with open(conf, "w") as f:
            f.write("set -g status off\nset -g history-limit 5000\n")
        self.conf = conf

    def tearDown(self):
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True)
        super().tearDown()

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.socket, "-f", self.conf] + list(args), capture_output=True,
                              text=True, check=True).stdout

    def setup_pair(self, allow="run,shell,cp"):
        self.phome, self.chome = self.new_home("provider"), self.new_home("consumer")
        self.provider = self.start_provider(self.phome, "--allow", allow)

    def start_shell(self, exec_=False):
        """`runsnack shell` in a 100x30 tmux pane; its exit status and stty state land in files."""
        self.exit_file = os.path.join(self.tmp, "exit")
        self.pid_file = os.path.join(self.tmp, "pid")
        self.err_file = os.path.join(self.tmp, "stderr")
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in self.env(self.chome).items()
                       if k in ("RUNSNACK_HOME", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PATH"))
        cmd = "%s %s shell %s 2>%s" % (shlex.quote(BIN), "", shlex.quote(self.provider.link), shlex.quote(self.err_file))
        if exec_:
            script = "echo $$ > %s; exec env %s %s" % (self.pid_file, env, cmd)
        else:
            script = ("env %s %s; echo $? > %s.tmp; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon' >> %s.tmp; "
                      "mv %s.tmp %s; sleep 600") % (env, cmd, self.exit_file, self.exit_file, self.exit_file,
                                                    self.exit_file)
        # In self.tmp: the shell opens the workspace of that folder.
        self.tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "-c", self.tmp, "sh", "-c", script)
        self.wait_screen(r"@runsnack:.*[#$] ?$")  # the remote prompt

    def screen(self):
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t")

    def keys(self, text):
        self.tmux("send-keys", "-t", "t", "-l", text)
        self.tmux("send-keys", "-t", "t", "Enter")

    def wait_screen(self, pattern, deadline=20):
        return self.poll_until(lambda: re.search(pattern, self.screen(), re.M), deadline,
                               "%r on the screen" % pattern)

    def procs_with(self, marker):
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as f:
                        if marker.encode() in f.read():
                            found.append(int(pid))
                except OSError:
                    pass
        return found

    def stderr_text(self):
        try:
            with open(self.err_file, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def test_keys_resize_job_control_exit_status(self):
        self.setup_pair()
        self.start_shell()
        self.keys("echo $((6*7))")
        self.wait_screen(r"^42$")
        screen = self.screen()
        self.assertNotIn("no job control", screen)
        self.assertNotIn("cannot set terminal process group", screen)
        self.keys("stty size")
        self.wait_screen(r"^30 100$")
        self.tmux("resize-window", "-t", "t", "-x", "120", "-y", "40")
        time.sleep(0.5)
        self.keys("stty size")
        self.wait_screen(r"^40 120$")
        # Job control and Ctrl-C inside the pty: a background job, then an interrupted foreground one.
        self.keys("sleep 300 & jobs")
        self.wait_screen(r"Running\s+sleep 300")
        self.keys("sleep 301")
        time.sleep(0.5)
        self.tmux("send-keys", "-t", "t", "C-c")
        self.keys("echo status=$?")
        self.wait_screen(r"^status=130$")
        self.keys("kill %1; exit 3")
        self.poll_until(lambda: os.path.exists(self.exit_file), 20, "the shell to exit")
        with open(self.exit_file) as f:
            lines = f.read().split()
        self.assertEqual(lines[0], "3", self.stderr_text())
        self.assertEqual(lines[1:], ["icanon"], "the local terminal is back in canonical mode")
        self.assertNotIn("ERROR: AddressSanitizer", self.stderr_text())
        ends = [e for e in self.audit(self.phome) if e["kind"] == "run_end"]
        self.assertEqual([e["detail"]["exit_status"] for e in ends], [3])
        self.assertEqual(ends[0]["detail"]["mode"], "shell")

    def test_sandboxed_workspace(self):
        self.setup_pair()
        self.start_shell()
        self.keys("pwd; echo made > made.txt; ls %s >/dev/null 2>&1 || echo no-provider-home" % shlex.quote(self.phome))
        self.wait_screen(r"^/workspace$")
        self.wait_screen(r"^no-provider-home$")
        self.keys("exit")
        self.poll_until(lambda: os.path.exists(self.exit_file), 20, "the shell to exit")
        with open(os.path.join(self.workspace_dir(self.phome, self.chome, self.tmp), "made.txt")) as f:
            self.assertEqual(f.read(), "made\n")

    def test_refused_without_shell(self):
        self.setup_pair(allow="run")
        self.fails(self.chome, "shell", self.provider.link, contains="does not allow")

    def test_disconnect_kills_remote_shell(self):
        self.setup_pair()
        self.start_shell(exec_=True)
        self.keys("sleep 4712")
        self.poll_until(lambda: self.procs_with("sleep\x004712"), 20, "the remote sleep")
        # `runsnack sessions` shows the shell as the session's running command, with what it uses.
        def commands():
            return [c for s in json.loads(self.ok(self.phome, "sessions", "--json").stdout) for c in s["commands"]]
        [shell] = commands()
        self.assertTrue(shell["command"].endswith(" -l (shell)"), shell)
        self.assertGreater(shell["memory_bytes"], 0, shell)
        self.poll_until(lambda: os.path.exists(self.pid_file), 5, "the pid file")
        with open(self.pid_file) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGKILL)  # the runsnack shell we started (exec'd in place of its sh)
        self.poll_until(lambda: not self.procs_with("sleep\x004712"), 5, "the remote processes gone")
        self.poll_until(lambda: not commands(), 20, "the shell's row to go")


if __name__ == "__main__":
    unittest.main()
