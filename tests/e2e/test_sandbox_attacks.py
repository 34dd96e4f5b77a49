"""The adversary suite (issue 14): a hostile link holder against a provider started as root and as an
ordinary user. Each test plays the attack through the real CLI and asserts that it fails, with a clear
message to the consumer and an audit record where the provider refuses something.

- AsRoot: the provider runs as root (skipped when this test is not root).
- AsUser: the provider runs as a throwaway ordinary user made for the test (useradd, removed afterwards)
  when this test is root, or as this test's own user otherwise.

What is tried: the open_by_handle_at ("shocker") escape reading the provider's identity.pem; capabilities,
uid, no_new_privs and seccomp inside; mount, keyctl, add_key, bpf, perf_event_open, userfaultfd, unshare,
setns, name_to_handle_at; 20 x 45 MB under a 50 MB --disk-quota; filling /tmp, /dev/shm and / past --memory;
`run --timeout 3s` whose output the consumer never reads; a 100 GiB sparse file pulled while a second
consumer runs `info`; the symlink chain s -> ., t -> s/.., u -> t/..; a pull over --max-pull; and that
python3 with threads, a C program built by gcc and the CUDA shim's host-backend program still run.
"""

import json
import os
import pwd
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest

from harness import E2ETestCase, BIN, REPO, replace_query_param, split_link, workspace_name

MB = 1000 * 1000
MIB = 1024 * 1024
QUOTA = "50M"  # parse_size: M is 2^20 bytes
# The sync state attack (issue 37): workspaces synced, and files of 3.8 KB paths in each (~7.8 MB of
# state per workspace), under a quota of its own.
SYNC_STATE_WORKSPACES = 5
SYNC_STATE_FILES = 1000
SYNC_STATE_QUOTA_MIB = 16

# Runs inside the sandbox: every probe, one JSON object on stdout. Syscall numbers are per architecture.
PROBE = r'''
import ctypes, errno, json, os, platform, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {
    "x86_64": dict(mount=165, umount2=166, pivot_root=155, keyctl=250, add_key=248, bpf=321, perf_event_open=298,
                   userfaultfd=323, unshare=272, setns=308, open_by_handle_at=304, name_to_handle_at=303,
                   kexec_load=246, init_module=175),
    "aarch64": dict(mount=40, umount2=39, pivot_root=41, keyctl=219, add_key=217, bpf=280, perf_event_open=241,
                    userfaultfd=282, unshare=97, setns=268, open_by_handle_at=265, name_to_handle_at=264,
                    kexec_load=104, init_module=105),
}[platform.machine()]
out = {}

def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *args)
    if r < 0:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return "ok"

status = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    status[k] = v.strip()
out["status"] = {k: status.get(k) for k in ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs",
                                            "Seccomp")}
out["uid"] = os.getuid()

# The "shocker" escape: a handle to inode 2 (the root of the host filesystem behind /etc), then a walk to
# the provider's key and a write next to it.
class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 8)]
handle = FileHandle(8, 1, (ctypes.c_ubyte * 8)(*struct.pack("<II", 2, 0)))
out["open_by_handle_at"] = "not tried"
for mount_point in ("/workspace", "/etc"):  # the workspace is writable, /etc is on the host's root filesystem
    mount_fd = os.open(mount_point, os.O_RDONLY)
    ctypes.set_errno(0)
    root_fd = libc.syscall(NR["open_by_handle_at"], mount_fd, ctypes.byref(handle), os.O_RDONLY | os.O_DIRECTORY)
    if root_fd < 0:
        out["open_by_handle_at"] = errno.errorcode.get(ctypes.get_errno(), "?")
        continue
    out["open_by_handle_at"] = "ok"
    try:
        fd = os.open(sys.argv[1], os.O_RDONLY, dir_fd=root_fd)
        out["key"] = os.read(fd, 4096).decode("utf-8", "replace")
    except OSError as e:
        out["key_error"] = str(e)
    try:
        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=root_fd)
        os.write(fd, b"escaped")
        out["wrote"] = True
    except OSError as e:
        out["write_error"] = str(e)

class Handle128(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 128)]
h = Handle128(128, 0)
mount_id = ctypes.c_int(0)
out["name_to_handle_at"] = call("name_to_handle_at", -100, b"/etc/hostname", ctypes.byref(h), ctypes.byref(mount_id), 0)

os.makedirs("/tmp/mnt", exist_ok=True)
out["mount"] = call("mount", b"none", b"/tmp/mnt", b"tmpfs", 0, None)
out["umount2"] = call("umount2", b"/proc", 2)
out["pivot_root"] = call("pivot_root", b"/tmp", b"/tmp/mnt")
out["keyctl"] = call("keyctl", 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a new session keyring
out["add_key"] = call("add_key", b"user", b"runsnack-probe", b"x", 1, ctypes.c_long(-2))
attr = struct.pack("<IIII", 2, 4, 4, 1) + bytes(56)  # BPF_MAP_CREATE: an array map
out["bpf"] = call("bpf", 0, ctypes.create_string_buffer(attr, len(attr)), len(attr))
pattr = struct.pack("<IIQ", 1, 112, 0) + bytes(96)  # PERF_TYPE_SOFTWARE, CPU clock
out["perf_event_open"] = call("perf_event_open", ctypes.create_string_buffer(pattr, len(pattr)), 0, -1, -1, 0)
out["userfaultfd"] = call("userfaultfd", os.O_CLOEXEC)
out["unshare_user"] = call("unshare", 0x10000000)
out["unshare_mount"] = call("unshare", 0x00020000)
try:
    ns = os.open("/proc/self/ns/uts", os.O_RDONLY)
    out["setns"] = call("setns", ns, 0)
except OSError:
    out["setns"] = call("setns", 0, 0)  # no namespace file to name: any descriptor asks the filter
out["kexec_load"] = call("kexec_load", 0, 0, None, 0)
out["init_module"] = call("init_module", None, 0, b"")
# Socket families the sandbox has no use for: vsock is not namespaced (on a VM, the hypervisor).
import socket
for family, kind, name in ((40, socket.SOCK_STREAM, "vsock"), (17, socket.SOCK_RAW, "packet"),
                           (31, socket.SOCK_STREAM, "bluetooth"), (38, socket.SOCK_SEQPACKET, "alg"),
                           (2, socket.SOCK_STREAM, "inet"), (1, socket.SOCK_STREAM, "unix")):
    try:
        s = socket.socket(family, kind)
        if family == 40:  # AF_VSOCK: bind and listen on any port, as a service for the host would
            s.bind((0xFFFFFFFF, 5000))
            s.listen(1)
        s.close()
        out["socket_" + name] = "ok"
    except OSError as e:
        out["socket_" + name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
'''

# A consumer program that writes 20 files of 45 MB, going on after errors.
FILL = r'''
import os, sys
written = 0
for i in range(20):
    try:
        with open("f%02d" % i, "wb") as f:
            for _ in range(45):
                f.write(b"\1" * 1000000)
        written += 1
    except OSError as e:
        print("file %d: %s" % (i, e), flush=True)
print("files written whole:", written, flush=True)
'''

# Fills a folder past the memory limit; prints how much landed.
FILL_DIR = r'''
import os, sys
path = os.path.join(sys.argv[1], "fill")
n = 0
try:
    with open(path, "wb") as f:
        while n < int(sys.argv[2]):
            f.write(b"\1" * 1000000)
            f.flush()
            n += 1
except OSError as e:
    print("error:", e, flush=True)
print("landed MB:", os.path.getsize(path) // 1000000 if os.path.exists(path) else 0, flush=True)
'''

THREADS = r'''
import threading, hashlib
results = []
def work(i):
    h = hashlib.sha256()
    for k in range(20000):
        h.update(b"%d-%d" % (i, k))
    results.append(h.hexdigest())
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print("threads ok", len(results))
'''

C_PROGRAM = r'''
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static void* work(void* arg) { long* v = arg; for (int i = 0; i < 1000000; ++i) *v += i % 7; return NULL; }
int main(void) {
  pthread_t t[4]; long v[4] = {0};
  for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, work, &v[i]);
  for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  printf("c program ok %ld\n", v[0] + v[1] + v[2] + v[3]);
  return 0;
}
'''


def lstat_dev(path):
    try:
        return os.lstat(path).st_dev
    except PermissionError:  # a user's FUSE mount (a workspace image by fuse2fs) is closed even to root
        return None


def allocated_bytes(top):
    """Disk blocks under `top` on its own filesystem (a mount below it, e.g. a workspace image, is not entered)."""
    dev = os.lstat(top).st_dev
    total = 0
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if lstat_dev(os.path.join(dirpath, d)) == dev]
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def process_read_bytes(pid):
    """What the process has read in all (read/pread/recv: /proc/PID/io rchar)."""
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def process_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def procs_with(marker):
    """Live (not zombie) processes whose command line contains `marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open("/proc/%s/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            found.append(int(pid))
        except OSError:
            pass
    return found


def cmdline_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")[:200]
    except OSError:
        return ""


def mounts_under(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == path or point.startswith(path.rstrip("/") + "/"):
                out.append(point)
    return out


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def mounts_seen_by(pid):
    """Mount points in the mount namespace of process `pid` (empty when it is gone)."""
    try:
        with open("/proc/%d/mountinfo" % pid) as f:
            return [line.split()[4].replace("\\040", " ") for line in f]
    except OSError:
        return []


def figure(test, text):
    # A measured figure for docs/SECURITY.md (stderr: unittest -v shows it beside the test's name).
    print("\nFIGURE %s: %s" % (test.id().split(".", 1)[1], text), file=sys.stderr, flush=True)


# Tries to make (and removes) a group below this process's own cgroup, where share's limits would make one.
CGROUP_PROBE = r'''
import os
for line in open("/proc/self/cgroup"):
    number, controllers, path = line.rstrip("\n").split(":", 2)
    if number == "0" and controllers == "":
        root = "/sys/fs/cgroup"
    elif "memory" in controllers.split(","):
        root = "/sys/fs/cgroup/memory"
    else:
        continue
    probe = os.path.join(root, path.lstrip("/"), "runsnack-test-probe-%d" % os.getpid())
    try:
        os.mkdir(probe)
    except OSError:
        continue
    os.rmdir(probe)
    print(probe)
'''


class AttackSuite:
    """The attacks; a subclass says how the provider is started (as_user)."""

    AS_USER = False

    # --- set-up ----------------------------------------------------------------------------------

    def setUp(self):
        super().setUp()
        self.wrapper = ()
        self.user = None
        if not self.AS_USER and os.geteuid() != 0:
            self.skipTest("the provider-as-root half needs root")
        if self.AS_USER and os.geteuid() == 0:
            self.make_user()
        self.addCleanup(self.unmount_leftovers)

    def make_user(self):
        # A throwaway system user, unique per run; removed after the test (its processes are stopped by then).
        name = "rsatk%d%04d" % (os.getpid() % 100000, random.randrange(10000))
        cp = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                            capture_output=True, text=True)
        if cp.returncode != 0:
            self.skipTest("cannot create a throwaway user: %s" % cp.stderr.strip())
        self.user = pwd.getpwnam(name)
        self.addCleanup(subprocess.run, ["userdel", name], capture_output=True)
        os.chmod(self.tmp, 0o755)
        self.wrapper = ("setpriv", "--reuid=%d" % self.user.pw_uid, "--regid=%d" % self.user.pw_gid, "--clear-groups", "--")

    def unmount_leftovers(self):
        # Only when a provider was killed before it could unmount its workspace images (a failing test).
        for point in reversed(mounts_under(self.tmp)):
            subprocess.run(["umount", "-l", point], capture_output=True)

    def provider_home(self):
        home = self.new_home("provider")
        if self.user:
            os.chown(home, self.user.pw_uid, self.user.pw_gid)
        return home

    def start_pair(self, *share_args, env_extra=None):
        self.phome, self.chome = self.provider_home(), self.new_home("consumer")
        env = dict({"HOME": self.phome} if self.user else {}, **(env_extra or {})) or None
        self.provider = self.start_provider(self.phome, "--allow", "run,cp,cuda", *share_args, wrapper=self.wrapper,
                                            env_extra=env)
        self.link = self.provider.link
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work, exist_ok=True)
        # With a quota, its image is mounted on the link's folder, which holds a folder per consumer.
        quota_link = self.link if "--disk-quota" in share_args else None
        self.quota_dir = self.link_folder(self.phome, self.link) if quota_link else None
        self.consumer_dir = self.consumer_folder(self.phome, self.chome, quota_link)
        self.workspace = self.workspace_dir(self.phome, self.chome, self.work, quota_link)
        self.cli_cwd = self.work  # cp uses the workspace `run --sync work` syncs to

    def write(self, rel, text):
        with open(os.path.join(self.work, rel), "w") as f:
            f.write(text)

    def remote(self, *cmd, extra=(), timeout=120):
        return self.run_cli(self.chome, "run", self.link, *extra, "--sync", self.work, "--", *cmd, timeout=timeout)

    def provider_audit(self):
        cp = subprocess.run(list(self.wrapper) + [BIN, "log", "--json"], capture_output=True, text=True,
                            env=self.env(self.phome), timeout=60)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]

    def audit_reasons(self):
        return [str(r.get("reason", "")) for r in self.provider_audit()]

    # --- privileges and the kernel's attack surface ---------------------------------------------------

    def test_shocker_and_privileged_syscalls_fail(self):
        self.start_pair()
        key = os.path.join(self.phome, "identity.pem")
        self.assertTrue(os.path.exists(key))
        marker = os.path.join(self.tmp, "escaped-%d" % os.getpid())
        self.write("probe.py", PROBE)
        cp = self.remote("python3", "probe.py", key.lstrip("/"), marker.lstrip("/"))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        probe = json.loads(cp.stdout.strip().splitlines()[-1])
        self.assertNotIn("key", probe, "the sandbox read the provider's identity key")
        self.assertNotIn("BEGIN", cp.stdout)
        self.assertFalse(os.path.exists(marker), "the sandbox wrote a file on the host")
        for call in ("open_by_handle_at", "name_to_handle_at", "mount", "umount2", "pivot_root", "keyctl", "add_key",
                     "bpf", "perf_event_open", "userfaultfd", "unshare_user", "unshare_mount", "setns", "kexec_load",
                     "init_module"):
            self.assertIn(probe[call], ("EPERM", "EACCES", "ENOSYS"), "%s inside the sandbox: %s" % (call, probe))
        for family in ("vsock", "packet", "bluetooth", "alg"):  # vsock bound and listened on main before issue 37
            self.assertEqual(probe["socket_" + family], "EAFNOSUPPORT", "socket(%s) inside the sandbox: %s" % (family, probe))
        self.assertEqual((probe["socket_inet"], probe["socket_unix"]), ("ok", "ok"), probe)
        status = probe["status"]
        self.assertEqual(status["CapEff"], "0000000000000000", status)
        self.assertEqual(status["CapPrm"], "0000000000000000", status)
        self.assertEqual(status["CapAmb"], "0000000000000000", status)
        self.assertEqual(status["NoNewPrivs"], "1", status)
        self.assertEqual(status["Seccomp"], "2", status)  # a filter is in force
        self.assertNotEqual(probe["uid"], 0)
        if not self.AS_USER:
            # The uid owns nothing on the host: not root's, not any account's.
            self.assertNotIn(probe["uid"], [p.pw_uid for p in pwd.getpwall()])

    def test_workspace_belongs_to_the_sandbox_uid(self):
        self.start_pair()
        self.write("in.txt", "synced")
        cp = self.remote("sh", "-c", "echo more >> in.txt && mkdir -p out && echo r > out/r.txt && id -u && cat in.txt")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        uid = int(cp.stdout.split()[0])
        self.assertIn("synced", cp.stdout)
        self.assertEqual(os.lstat(os.path.join(self.workspace, "out", "r.txt")).st_uid, uid)
        # The provider's own state stays the provider's.
        self.assertNotEqual(os.lstat(os.path.join(self.phome, "identity.pem")).st_uid, uid if not self.AS_USER else -1)

    # --- limits that hold as totals -------------------------------------------------------------------

    def set_fuse_open_to_users(self, open_to_users):
        """/dev/fuse as Debian leaves it (0666: any user may mount with fuse2fs) or closed (0600, as in
        many containers); restored after the test."""
        mode = os.stat("/dev/fuse").st_mode & 0o777
        self.addCleanup(os.chmod, "/dev/fuse", mode)
        os.chmod("/dev/fuse", 0o666 if open_to_users else 0o600)

    def quota_modes(self):
        return {r["detail"]["limits"].get("disk_quota_enforced_by") for r in self.provider_audit()
                if isinstance(r.get("detail"), dict) and isinstance(r["detail"].get("limits"), dict)} - {None}

    def fill_past_the_quota(self):
        before = allocated_bytes(self.phome)
        self.write("fill.py", FILL)
        cp = self.remote("python3", "fill.py")
        self.assertIn("the workspace is full: 50 MB quota", cp.stderr)
        self.assertTrue(any("the workspace is full" in r for r in self.audit_reasons()))
        # The provider still serves: a small command after the refusal runs.
        again = self.remote("true")
        self.assertEqual(again.returncode, 0, again.stderr)
        return allocated_bytes(self.phome) - before, cp

    def test_disk_quota_holds_for_many_files(self):
        if self.AS_USER:
            # An ordinary user's provider mounts the workspace image with fuse2fs (scripts/install-deps
            # installs it, as the Debian package recommends).
            for tool in ("/usr/bin/fuse2fs", "/usr/bin/fusermount3"):
                self.assertTrue(os.access(tool, os.X_OK), tool + " is missing: apt install fuse2fs fuse3")
            self.set_fuse_open_to_users(True)
        self.start_pair("--disk-quota", QUOTA)
        used, cp = self.fill_past_the_quota()
        figure(self, "20 x 45 MB under a 50 MB quota: %.1f MB landed on the host" % (used / MB))
        # The workspace is an ext4 image of the quota's size: a hard total, whoever runs the provider.
        self.assertLess(used, 50 * MB * 1.3, "the workspace grew to %d bytes under a 50 MB quota: %s" % (used, cp.stdout))
        self.assertEqual(self.quota_modes(), {"ext4 image (fuse2fs)" if self.AS_USER else "ext4 image"})
        self.assertIn(self.quota_dir, mounts_under(self.tmp), "the workspace image is not mounted")
        self.provider.stop()
        self.assertNotIn(self.quota_dir, mounts_under(self.tmp), "the provider left its workspace image mounted")

    def test_disk_quota_holds_for_the_link_not_each_consumer(self):
        """Issue 37, finding 6: the quota was an image per consumer identity, and identities cost
        nothing: six made on the spot on one `--disk-quota 50M` link put 283.5 MB on the host."""
        if self.AS_USER:
            self.skipTest("the provider as root covers it: the link's image and its folders are the same "
                          "whoever mounts it (fuse2fs: test_disk_quota_holds_for_many_files)")
        self.start_pair("--disk-quota", QUOTA)
        self.write("fill.py", FILL)
        before = allocated_bytes(self.phome)
        homes = [self.chome] + [self.new_home("identity%d" % i) for i in range(1, 6)]
        for home in homes:
            cp = self.run_cli(home, "run", self.link, "--sync", self.work, "--", "python3", "fill.py", timeout=180)
            self.assertIn("the workspace is full: 50 MB quota", cp.stderr)
        used = allocated_bytes(self.phome) - before
        figure(self, "6 identities x 20 x 45 MB on one link under a 50 MB quota: %.1f MB landed on the host"
               % (used / MB))
        self.assertLess(used, 50 * MB * 1.3, "six identities put %.1f MB on the host under one 50 MB link" % (used / MB))
        # One image, the link's, mounted on its folder; a folder per consumer in it, each its own.
        self.assertEqual(mounts_under(os.path.join(self.phome, "workspaces")), [self.quota_dir])
        # (Those who came once it was full have none: even a folder is refused, "the workspace is full".)
        folders = [n for n in os.listdir(self.quota_dir) if n != "lost+found"]
        self.assertIn(self.peer_id(self.chome), folders)
        self.assertLessEqual(set(folders), {self.peer_id(h) for h in homes})
        owners = set()
        for peer in folders:
            st = os.stat(os.path.join(self.quota_dir, peer))
            self.assertEqual(st.st_mode & 0o777, 0o700, peer)
            owners.add(st.st_uid)
        self.assertEqual(len(owners), len(folders), "each consumer's folder belongs to its own sandbox uid")
        self.assertEqual(os.stat(self.quota_dir).st_mode & 0o777, 0o711)
        # Each sees only its own workspaces, and that the room is the link's, used by everyone.
        out = json.loads(self.ok(self.chome, "workspaces", self.link, "--json").stdout)
        self.assertEqual([w["name"] for w in out["workspaces"]], [workspace_name(self.work)])
        self.assertEqual(out["quota_bytes"], 50 << 20)
        self.assertGreater(out["quota_used_bytes"], 40 * MB)
        table = self.ok(homes[5], "workspaces", self.link).stdout
        self.assertIn("disk quota is shared by everyone who uses the link", table)
        # Room a consumer gives back is everyone's again.
        self.ok(self.chome, "workspaces", self.link, "--remove", workspace_name(self.work))
        cp = self.run_cli(homes[5], "run", self.link, "--", "sh", "-c", "head -c 20000000 /dev/zero > room && echo ok")
        self.assertEqual((cp.returncode, cp.stdout.strip()), (0, "ok"), cp.stderr)

    def test_an_earlier_image_per_consumer_moves_into_the_link(self):
        """Providers of earlier versions kept an image per consumer (<state>/workspaces/<PeerId>.img):
        the first link with a quota the consumer uses takes its workspaces in, and the image goes."""
        if self.AS_USER:
            self.skipTest("the provider as root covers it (the same copy through fuse2fs)")
        phome, chome = self.provider_home(), self.new_home("consumer")
        peer = self.peer_id(chome)
        earlier = os.path.join(self.tmp, "earlier")
        os.makedirs(os.path.join(earlier, "exp1"))
        with open(os.path.join(earlier, ".runsnack-workspaces"), "w"):
            pass
        with open(os.path.join(earlier, "exp1", "kept.txt"), "w") as f:
            f.write("from before the update")
        workspaces = os.path.join(phome, "workspaces")
        os.makedirs(os.path.join(workspaces, peer))
        image = os.path.join(workspaces, peer + ".img")
        with open(image, "wb") as f:
            f.truncate(16 << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-d", earlier, image], check=True, capture_output=True)
        self.provider = self.start_provider(phome, "--allow", "run,cp", "--disk-quota", QUOTA)
        link = self.provider.link
        cp = self.run_cli(chome, "run", link, "--workspace", "exp1", "--", "cat", "kept.txt")
        self.assertEqual((cp.returncode, cp.stdout), (0, "from before the update"), cp.stderr)
        self.assertFalse(os.path.exists(image), "the earlier image is still there")
        self.assertFalse(os.path.exists(os.path.join(workspaces, peer)))
        self.assertEqual(mounts_under(workspaces), [self.link_folder(phome, link)])
        out = json.loads(self.ok(chome, "workspaces", link, "--json").stdout)
        self.assertEqual([w["name"] for w in out["workspaces"]], ["exp1"])

    def test_sync_state_counts_against_the_quota_and_memory_is_bounded(self):
        """Issue 37, finding 1: each workspace's sync state (the last manifest and the hash cache) lay
        beside the quota image, and up to 16 states stayed in the provider's memory, however large. A
        consumer syncing workspace after workspace of files with 3.8 KB paths (which take next to
        nothing in the image) grew the host's disk and the provider by ~8 MB per workspace."""
        if self.AS_USER:
            # The state's place (the consumer's folder, the image mounted on it) and the memory bound
            # do not depend on who mounts the image; through fuse2fs the syncs alone take ~90 s.
            self.skipTest("the provider as root covers it")
        # A small allocator quarantine (ASan build): RSS shows what the provider holds.
        self.start_pair("--disk-quota", "%dM" % SYNC_STATE_QUOTA_MIB,
                        env_extra={"ASAN_OPTIONS": "detect_leaks=0:quarantine_size_mb=16:"
                                                   "thread_local_quarantine_size_kb=256"})
        # 14 folders of 255 bytes, then empty files of 220-byte names: 3.8 KB paths. Made through
        # descriptors: the whole path is longer than the kernel takes in one piece.
        tree = os.path.join(self.tmp, "deep")
        os.makedirs(tree)
        fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(14):
            name = ("%02d" % i) * 127 + "d"
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        for i in range(SYNC_STATE_FILES):
            os.close(os.open("%06d" % i + "f" * 214, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        os.close(fd)
        workspaces = os.path.join(self.phome, "workspaces")
        refused = 0

        def sync_and_delete(workspace):
            # Synced, then deleted by the command: the image is left (nearly) empty, the state is not.
            nonlocal refused
            cp = self.run_cli(self.chome, "run", self.link, "--workspace", workspace, "--sync", tree, "--",
                              "sh", "-c", "rm -rf -- ./*", timeout=180)
            # Once the states fill the consumer's image, its syncs are refused like any write past the quota.
            if cp.returncode != 0:
                self.assertIn("the workspace is full", cp.stderr)
                refused += 1

        # The first sync makes the image and takes what one such sync needs in memory (the ASan build's
        # allocator keeps it); from there on, what the provider holds shows as growth.
        sync_and_delete("w0")
        host_before, rss_before = allocated_bytes(workspaces), process_rss(self.provider.pid)
        peak = rss_before
        started = time.monotonic()
        for i in range(1, SYNC_STATE_WORKSPACES + 1):
            sync_and_delete("w%d" % i)
            peak = max(peak, process_rss(self.provider.pid))
        seconds = time.monotonic() - started
        host = allocated_bytes(workspaces) - host_before
        held = process_rss(self.provider.pid) - rss_before
        figure(self, "1 + %d workspaces x %d files of 3.8 KB paths, synced then deleted, under a %d MiB quota, in %.1f s: "
                     "%d refused as full; host +%.1f MB under the provider's workspaces (%.1f MB in all); provider "
                     "RSS %.0f -> %.0f MiB (+%.0f MiB held after, peak %.0f MiB)"
                     % (SYNC_STATE_WORKSPACES, SYNC_STATE_FILES, SYNC_STATE_QUOTA_MIB, seconds, refused, host / MB,
                        allocated_bytes(workspaces) / MB, rss_before / MIB, (rss_before + held) / MIB, held / MIB,
                        peak / MIB))
        # The states take the consumer's room (its image), not the host's.
        self.assertLess(allocated_bytes(workspaces), SYNC_STATE_QUOTA_MIB * MIB * 1.3,
                        "the sync states took %.1f MB of the host beyond a %d MiB quota"
                        % (host / MB, SYNC_STATE_QUOTA_MIB))
        self.assertEqual([n for n in os.listdir(workspaces) if ".sync" in n], [])
        # ~8.5 MiB per state in memory; the provider keeps at most 16 MiB of a consumer's states (+16 to
        # +18 MiB measured; main kept all of them: +51 MiB).
        self.assertLess(held, 32 * MIB, "the provider holds %.0f MiB more after the syncs" % (held / MIB))
        # Removing the workspaces removes their states: the image has room again for the consumer's files
        # (half the quota: fuse2fs keeps a tenth of an image without root's reserve to itself).
        for i in range(SYNC_STATE_WORKSPACES + 1):
            self.ok(self.chome, "workspaces", self.link, "--remove", "w%d" % i)
        cp = self.run_cli(self.chome, "run", self.link, "--workspace", "after", "--no-sync", "--",
                          "sh", "-c", "head -c %d /dev/zero > f && echo wrote" % (SYNC_STATE_QUOTA_MIB * MIB // 2),
                          timeout=120)
        self.assertIn("wrote", cp.stdout, cp.stderr)

    def start_under_no_new_privs(self):
        """The Debian unit's provider: an ordinary user with no_new_privs (NoNewPrivileges=yes), so the setuid
        fusermount3 cannot mount; fuse2fs mounts the image itself, in a user and mount namespace of its own.
        Returns the image's path."""
        if not self.AS_USER:
            self.skipTest("a root provider mounts the image with the kernel, no_new_privs or not")
        if not os.access("/usr/bin/fuse2fs", os.X_OK):
            self.skipTest("fuse2fs is not installed (apt install fuse2fs)")
        probe = subprocess.run(list(self.wrapper) + ["unshare", "--user", "--mount", "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("user namespaces are not available to an ordinary user here: %r" % probe.stderr)
        if self.user is None and (os.stat("/dev/fuse").st_mode & 0o006) != 0o006:
            self.skipTest("/dev/fuse is closed to this user")
        if self.user:
            self.set_fuse_open_to_users(True)
        self.wrapper = tuple(self.wrapper[:-1]) + ("--no-new-privs", "--") if self.wrapper else \
            ("setpriv", "--no-new-privs", "--")
        self.start_pair("--disk-quota", QUOTA)
        image = self.quota_dir + ".img"
        self.addCleanup(self.stop_holders, image)
        return image

    def test_disk_quota_holds_under_no_new_privs(self):
        image = self.start_under_no_new_privs()
        with open(self.provider.stderr_path, errors="replace") as f:
            self.assertNotIn("measured every 250 ms", f.read())
        # The provider's own work in the workspace (sync, cp both ways, pull) reaches the image in
        # fuse2fs's namespace, and so does the command.
        self.write("in.txt", "synced")
        ran = self.remote("sh", "-c", "mkdir -p out && cat in.txt > out/p.txt && echo pulled >> out/p.txt",
                          extra=("--pull", "out"))
        self.assertEqual(ran.returncode, 0, ran.stderr)
        with open(os.path.join(self.work, "out", "p.txt")) as f:
            self.assertEqual(f.read(), "syncedpulled\n")
        self.ok(self.chome, "cp", self.link, os.path.join(self.work, "in.txt"), "remote:copied/in.txt")
        back = os.path.join(self.tmp, "back")
        os.makedirs(back)
        self.ok(self.chome, "cp", self.link, "remote:copied/in.txt", back + "/")
        with open(os.path.join(back, "in.txt")) as f:
            self.assertEqual(f.read(), "synced")
        self.assertFalse(os.listdir(self.quota_dir), "files landed in the host's folder beneath the image")
        used, cp = self.fill_past_the_quota()
        figure(self, "20 x 45 MB under a 50 MB quota, no_new_privs: %.1f MB landed on the host" % (used / MB))
        self.assertLess(used, 52 * MB, "the workspace grew to %d bytes under a 50 MB quota: %s" % (used, cp.stdout))
        self.assertEqual(self.quota_modes(), {"ext4 image (fuse2fs, namespace)"})
        holders = procs_with(image)
        self.assertEqual(len(holders), 1, [cmdline_of(p) for p in holders])
        self.assertIn(self.quota_dir, mounts_seen_by(holders[0]), "the image is not mounted in fuse2fs's namespace")
        self.provider.stop()
        self.poll_until(lambda: not procs_with(image), 10, "fuse2fs to exit with the provider")
        self.assertEqual([p for p in all_pids() if self.quota_dir in mounts_seen_by(p)], [],
                         "a namespace still holds the workspace image mounted")

    def test_disk_quota_namespace_ends_with_a_killed_provider(self):
        image = self.start_under_no_new_privs()
        self.write("in.txt", "kept")
        ran = self.remote("sh", "-c", "cp in.txt made.txt")
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertEqual(len(procs_with(image)), 1)
        os.kill(self.provider.pid, 9)  # no chance to unmount: its fuse2fs must not outlive it
        self.provider.wait(15)
        self.poll_until(lambda: not procs_with(image), 15, "fuse2fs to end with its killed provider")
        self.assertEqual([p for p in all_pids() if self.quota_dir in mounts_seen_by(p)], [])
        # The image was written out whole: the next provider mounts it again and finds the file.
        self.provider = self.start_provider(self.phome, "--allow", "run,cp,cuda", "--disk-quota", QUOTA,
                                            wrapper=self.wrapper, env_extra={"HOME": self.phome} if self.user else None)
        # The same link (the quota's image is the link's), at the address the new provider listens on.
        self.link = replace_query_param(self.link, "c", split_link(self.provider.link)["c"])
        cp = self.run_cli(self.chome, "run", self.link, "--no-sync", "--", "cat", "made.txt", timeout=120)
        self.assertEqual((cp.returncode, cp.stdout), (0, "kept"), cp.stderr)

    def stop_holders(self, image):
        # Only when a provider was killed before it could stop its image's fuse2fs (a failing test).
        for pid in procs_with(image):
            try:
                os.kill(pid, 15)
            except OSError:
                pass

    def test_disk_quota_is_measured_where_no_image_can_be_mounted(self):
        if not self.AS_USER:
            self.skipTest("a root provider always mounts an image")
        self.set_fuse_open_to_users(False)
        self.start_pair("--disk-quota", QUOTA)
        with open(self.provider.stderr_path, errors="replace") as f:
            self.assertIn("/dev/fuse is closed to this user", f.read())
        # Measured every 250 ms and the command stopped: a fast writer gets past the quota by what it
        # writes in one interval (615 MB seen on an idle machine, 90 MB on a loaded one), so only the
        # stop is asserted (docs/SECURITY.md, limits).
        used, _ = self.fill_past_the_quota()
        figure(self, "20 x 45 MB under a 50 MB measured quota: %.1f MB landed on the host" % (used / MB))
        self.assertEqual(self.quota_modes(), {"polling"})

    def test_tmp_and_shm_bounded_by_memory(self):
        # Where no cgroup holds --memory as a total, share refuses it without --memory-per-process.
        self.start_pair("--memory", "200M", "--memory-per-process")
        self.write("fill_dir.py", FILL_DIR)
        for where in ("/tmp", "/dev/shm"):
            cp = self.remote("python3", "fill_dir.py", where, "400")
            landed = [l for l in cp.stdout.splitlines() if l.startswith("landed MB:")]
            # Killed for memory or refused by the bounded tmpfs: either way no more than the limit landed.
            figure(self, "400 MB into %s under --memory 200M: %s, exit %d" % (where, landed[0] if landed else "killed",
                                                                           cp.returncode))
            if landed:
                # 200M is 200 MiB (parse_size), the script counts in 10^6 bytes
                self.assertLessEqual(int(landed[0].split(":")[1]), 200 * 1024 * 1024 // MB, cp.stdout + cp.stderr)
            else:
                self.assertNotEqual(cp.returncode, 0, cp.stdout + cp.stderr)
        cp = self.remote("sh", "-c", "echo x > /fill-root && echo wrote-root; echo x > /run/f && echo wrote-run; true")
        self.assertNotIn("wrote-root", cp.stdout)

    def test_timeout_fires_when_output_is_not_read(self):
        self.start_pair()
        marker = "rs-unread-%d-%d" % (os.getpid(), random.randrange(1 << 30))
        env = self.env(self.chome)
        # stdout is a pipe this test never reads: the consumer blocks on it and stops reading the stream.
        consumer = subprocess.Popen([BIN, "run", self.link, "--timeout", "3s", "--sync", self.work, "--", "yes", marker],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        remote = lambda: [p for p in procs_with(marker) if p != consumer.pid]  # the consumer's own line names it too
        try:
            seen = self.poll_until(remote, 60, "the command to start")
            started = time.monotonic()
            self.assertTrue(seen)
            # Its deadline is at most 3 s after `started`; it must be gone within 5 s of that.
            while remote() and time.monotonic() < started + 8:
                time.sleep(0.2)
            left = {p: cmdline_of(p) for p in remote()}
            figure(self, "run --timeout 3s, output unread: gone %.1f s after it was seen running" %
                   (time.monotonic() - started))
            self.assertEqual(left, {}, "the command outlived its deadline by more than 5 s while its output was unread")
        finally:
            consumer.kill()
            consumer.wait(timeout=30)
        self.poll_until(lambda: any("stopped at its 3 s time limit" in r for r in self.audit_reasons()), 30,
                        "the time limit in the audit log")

    def test_timeout_message(self):
        self.start_pair("--run-timeout", "20s")
        start = time.monotonic()
        cp = self.remote("sleep", "60", extra=("--timeout", "3s"))
        self.assertEqual(cp.returncode, 137, cp.stderr)
        self.assertIn("the command was stopped at its 3 s time limit", cp.stderr)
        self.assertLess(time.monotonic() - start, 50)

    # --- the provider's io thread and the consumer's disk ------------------------------------------

    def test_sparse_pull_does_not_stall_other_consumers(self):
        self.start_pair()
        # A second consumer asks for `info` every 0.2 s on one session: the time between its answers is
        # the provider's answer time plus that interval (a new process per `info` would mostly measure
        # the start of a sanitizer build).
        other = self.new_home("other")
        watcher = subprocess.Popen([BIN, "info", "--json", "--watch", "0.2", self.link], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env(other))
        answers = []

        def read_answers():
            for line in watcher.stdout:
                if line.startswith(b"{"):
                    answers.append(time.monotonic())
        reader = threading.Thread(target=read_answers, daemon=True)
        reader.start()
        try:
            self.poll_until(lambda: len(answers) >= 3, 60, "the first answers to info --watch")
            dest = os.path.join(self.tmp, "pulled")
            os.makedirs(dest)
            pull_started = time.monotonic()
            puller = self.start(self.chome, "run", self.link, "--pull", "big", "--sync", dest, "--", "truncate",
                                "-s", "100G", "big", name="puller")
            # The consumer's disk: whatever happens, the pull may not fill it.
            stop = threading.Event()

            def watchdog():
                while not stop.wait(0.5):
                    if allocated_bytes(dest) > 2 << 30:
                        puller.signal(9)
                        return
            threading.Thread(target=watchdog, daemon=True).start()
            try:
                rc = puller.wait(300)
                pull_ended = time.monotonic()
                # At least ten answers from the moment the pull began.
                self.poll_until(lambda: len([a for a in answers if a > pull_started]) >= 11, 120,
                                "ten answers since the pull began")
            finally:
                stop.set()
        finally:
            watcher.kill()
            watcher.wait(30)
            watcher.stdout.close()
        self.assertEqual(rc, 0, puller.stderr())
        # Every answer from the pull's start to its end, and at least ten.
        during = [a for a in answers if a > pull_started]
        last = max(next((i for i, a in enumerate(during) if a > pull_ended), len(during) - 1), 10)
        gaps = [b - a - 0.2 for a, b in zip(during[:last + 1], during[1:last + 1])]
        self.assertGreaterEqual(len(gaps), 10)
        figure(self, "info --watch beside a 100 GiB sparse pull (%.1f s): %d answers, slowest %.3f s over the interval" %
               (pull_ended - pull_started, len(gaps), max(gaps)))
        # The figure (docs/SECURITY.md) is the slowest gap, under 1 s on an idle machine; the assertion
        # leaves room for a loaded CI machine and still fails when the io thread reads the holes (a
        # provider before issue 14 answered nothing for minutes: "no answer from the provider in time").
        self.assertLess(max(gaps), 5.0, "info answers took %r s while the pull ran (%.1f s)" %
                        (gaps, pull_ended - pull_started))
        big = os.path.join(dest, "big")
        st = os.lstat(big)
        self.assertEqual(st.st_size, 100 << 30)
        self.assertLess(st.st_blocks * 512, 64 << 20, "the holes travelled as data")

    def test_sparse_file_on_fuse2fs_costs_what_it_holds(self):
        """Issue 37, finding 2: fuse2fs answers SEEK_DATA/SEEK_HOLE as if a file with no blocks were all data.
        On main a pull of `truncate -s 1T big` from an ordinary user's provider with --disk-quota read the
        holes at ~880 MiB/s for 18 minutes, on past the consumer's end and SIGTERM, holding offload threads
        that other consumers waited for. Now such a file is refused before it is read, with its sizes: a
        file may cost what it holds (twice that, plus 64 MiB)."""
        if not self.AS_USER:
            self.skipTest("a root provider's image is mounted by the kernel, whose ext4 shows holes")
        for tool in ("/usr/bin/fuse2fs", "/usr/bin/fusermount3"):
            self.assertTrue(os.access(tool, os.X_OK), tool + " is missing: apt install fuse2fs fuse3")
        self.set_fuse_open_to_users(True)
        self.start_pair("--disk-quota", QUOTA)
        made = self.remote("sh", "-c", "truncate -s 1T big && echo hello > small")
        self.assertEqual(made.returncode, 0, made.stderr)
        self.assertEqual(self.quota_modes(), {"ext4 image (fuse2fs)"})
        read_before = process_read_bytes(self.provider.pid)
        started = time.monotonic()
        # On main this read the whole terabyte: the timeout fails it.
        pull = self.remote("true", extra=("--pull", "big"), timeout=60)
        pull_s = time.monotonic() - started
        self.assertNotEqual(pull.returncode, 0, pull.stderr)
        self.assertIn("sparse file of 1 TiB with 0 bytes allocated", pull.stderr)
        out = os.path.join(self.tmp, "cp-out")
        os.makedirs(out)
        cp = self.run_cli(self.chome, "cp", self.link, "remote:big", out + "/", timeout=60)
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("sparse file of 1 TiB", cp.stderr)
        read = process_read_bytes(self.provider.pid) - read_before
        self.assertLess(read, 256 * MIB, "the provider read %.0f MiB for a file that holds nothing" % (read / MIB))
        self.assertTrue(any("sparse file of 1 TiB" in r for r in self.audit_reasons()))
        self.assertFalse(os.path.exists(os.path.join(out, "big")))
        # The provider still serves what a file holds.
        self.ok(self.chome, "cp", self.link, "remote:small", out + "/", timeout=60)
        with open(os.path.join(out, "small")) as f:
            self.assertEqual(f.read(), "hello\n")
        started = time.monotonic()
        rc = self.provider.stop(timeout=10)  # SIGTERM; SIGKILL after 10 s
        stop_s = time.monotonic() - started
        self.assertEqual(rc, 0, "the provider did not end by itself within 10 s of SIGTERM")
        figure(self, "1 TiB sparse file on fuse2fs: pull refused in %.1f s, cp refused; provider read %.1f MiB for "
                     "both; ended %.1f s after SIGTERM" % (pull_s, read / MIB, stop_s))

    def test_symlink_chain_never_leads_outside(self):
        self.start_pair()
        dest = os.path.join(self.tmp, "pulled")
        os.makedirs(dest)
        make = "mkdir -p d && ln -sfn . d/s && ln -sfn s/.. d/t && ln -sfn t/.. d/u && echo ok > d/file"
        cp = self.run_cli(self.chome, "run", self.link, "--pull", "d", "--sync", dest, "--", "sh", "-c", make)
        got = os.path.join(dest, "d")
        for name in ("s", "t", "u"):
            p = os.path.join(got, name)
            if os.path.islink(p):
                real = os.path.realpath(p)
                self.assertTrue(real == dest or real.startswith(dest + "/"),
                                "%s -> %s resolves outside %s" % (name, os.readlink(p), dest))
        self.assertIn("resolves outside", cp.stderr)
        self.assertNotEqual(cp.returncode, 0)
        out = os.path.join(self.tmp, "cp-out")
        os.makedirs(out)
        # From the workspace the run above synced `dest` to.
        cp = self.run_cli(self.chome, "cp", "--workspace", workspace_name(dest), self.link, "remote:d", out + "/")
        u = os.path.join(out, "d", "u")
        if os.path.islink(u):
            real = os.path.realpath(u)
            self.assertTrue(real.startswith(out + "/") or real == out, "cp: u -> %s" % real)
        self.assertIn("resolves outside", cp.stderr)

    def test_pull_size_limit_on_the_consumer(self):
        self.start_pair()
        dest = os.path.join(self.tmp, "pulled")
        os.makedirs(dest)
        cp = self.run_cli(self.chome, "run", self.link, "--max-pull", "10M", "--pull", "blob", "--sync", dest, "--",
                          "python3", "-c", "open('blob','wb').write(b'x' * 30000000)")
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("10 MB", cp.stderr)
        self.assertLess(allocated_bytes(dest), 12 * MB)

    def test_provider_transfer_limit(self):
        self.start_pair("--max-transfer", "10M")
        cp = self.remote("python3", "-c", "open('blob','wb').write(b'y' * 30000000)")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        out = os.path.join(self.tmp, "cp-out")
        os.makedirs(out)
        cp = self.run_cli(self.chome, "cp", self.link, "remote:blob", out + "/")
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("10 MB", cp.stderr)
        self.assertTrue(any("10 MB" in r for r in self.audit_reasons()))

    # --- what must keep working ------------------------------------------------------------------------

    def test_workloads_still_run(self):
        self.start_pair()
        self.write("threads.py", THREADS)
        self.write("prog.c", C_PROGRAM)
        cp = self.remote("python3", "threads.py")
        self.assertIn("threads ok 8", cp.stdout, cp.stderr)
        cp = self.remote("sh", "-c", "gcc -O1 -pthread -o prog prog.c && ./prog")
        self.assertIn("c program ok", cp.stdout, cp.stderr)

    def test_cuda_host_backend_program_runs_sandboxed(self):
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK)
                                        else None)
        shim = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(BIN))), "cuda-shim", "libcuda.so.1")
        if not nvcc or not os.path.exists(shim):
            self.skipTest("needs nvcc and the built CUDA shim")
        program = os.path.join(self.tmp, "vector_add")
        built = subprocess.run([nvcc, "-o", program, os.path.join(REPO, "tests", "cuda", "vector_add.cu")],
                               capture_output=True, text=True, timeout=600)
        self.assertEqual(built.returncode, 0, built.stderr)
        self.phome, self.chome = self.provider_home(), self.new_home("consumer")
        env = {"RUNSNACK_CUDA_BACKEND": "host"}
        if self.user:
            env["HOME"] = self.phome
        self.provider = self.start_provider(self.phome, "--allow", "cuda", env_extra=env, wrapper=self.wrapper)
        cp = self.run_cli(self.chome, "cuda", "--json", self.provider.link, "--", program, timeout=180)
        self.assertIn("round trip: ok", cp.stdout, cp.stderr)
        starts = [r for r in self.provider_audit() if r.get("kind") == "cuda_start" and r.get("decision") == "accept"]
        self.assertTrue(starts)
        limits = starts[0]["detail"]["limits"]
        self.assertTrue(limits.get("sandbox", "").startswith("bwrap"), limits)
        self.assertNotEqual(limits.get("uid"), 0)


class AsRoot(AttackSuite, E2ETestCase):
    AS_USER = False


class AsUser(AttackSuite, E2ETestCase):
    AS_USER = True

    def can_make_cgroup(self):
        """Whether the provider's user may make a cgroup below its own (v2, or v1's memory): a delegated one."""
        cp = subprocess.run(list(self.wrapper) + [sys.executable, "-c", CGROUP_PROBE], capture_output=True, text=True,
                            timeout=60)
        return cp.stdout.strip()

    def test_memory_it_cannot_hold_is_refused_unless_per_process_is_accepted(self):
        # Issue 37: under rlimits, --memory 200M bound each process alone (952 MiB resident in all, plus 382 MB in
        # /tmp and /dev/shm), and share said nothing of it.
        writable = self.can_make_cgroup()
        if writable:
            self.skipTest("this user can make a cgroup (%s): --memory is a total there" % writable)
        phome = self.new_home("refused-provider")
        if self.user:
            os.chown(phome, self.user.pw_uid, self.user.pw_gid)
        args = list(self.wrapper) + [BIN, "share", "--json", "--listen", "127.0.0.1:0", "--allow", "run", "--memory",
                                     "200M"]
        try:
            cp = subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                                env=self.env(phome, {"HOME": phome} if self.user else None))
        except subprocess.TimeoutExpired:
            self.fail("share --memory 200M started where no cgroup can hold it")
        self.assertEqual(cp.returncode, 1, cp.stdout + cp.stderr)
        self.assertNotIn('"ready"', cp.stdout)
        error = [l for l in cp.stderr.splitlines() if l.startswith("runsnack: ")][-1]
        for needed in ("--memory 200M would bind each process", "not their total", "no cgroup can hold it",
                       "runsnack-share.service", "--memory-per-process"):
            self.assertIn(needed, error)
        self.start_pair("--memory", "200M", "--memory-per-process")
        notes = [l for l in self.provider.stderr().splitlines() if "--memory 200M" in l]
        self.assertEqual(len(notes), 1, self.provider.stderr())
        self.assertIn("would bind each process of a command alone", notes[0])
        self.assertIn("accepted by --memory-per-process", notes[0])
        cp = self.remote("echo", "served")
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertIn("served", cp.stdout)


if __name__ == "__main__":
    unittest.main()
