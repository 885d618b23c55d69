#!/usr/bin/env python3
"""A stand-in for the `firecracker` binary, for tests (python3, stdlib only).

No Firecracker binary can be installed where sandgate's tests run, so this
plays its part as faithfully as a test needs:
  - the CLI: --api-sock PATH (default /run/firecracker.socket), --id,
    --level, --log-path, --show-level, --show-log-origin; anything else is
    an error (exit 1), as with the real argument parser;
  - the API socket: HTTP/1.1 (keep-alive, Content-Length bodies), the
    endpoints sandgate uses with Firecracker's validation: unknown fields,
    missing required fields and wrong types are 400 with a fault_message
    (its structs are serde deny_unknown_fields), path and body ids must
    match, files and the tap must exist, InstanceStart needs a boot source,
    nothing can be configured after it; success is 204 with no body;
  - the console: on InstanceStart the VM really boots, in QEMU `-M microvm`
    under TCG, with its serial console on this process's stdout (Firecracker
    prints the guest's ttyS0 on its stdout); when QEMU ends, so does this
    process, as Firecracker exits when the guest resets.
Every request is appended as one JSON line to $FAKE_FC_LOG (if set), and
the boot as {"event": "boot", ...} with the QEMU command line.
FAKE_FC_FAIL=<first path segment> (e.g. boot-source) makes PUTs to that
endpoint answer 400 with a fault_message, to test a client's error path.

Kernel: Firecracker loads the ELF vmlinux through its PVH entry point
(XEN_ELFNOTE_PHYS32_ENTRY). QEMU's microvm loads such an ELF too (its
-kernel takes a PVH ELF); if the ELF has no PVH note QEMU cannot, and the
fake boots the sibling `vmlinuz` instead and records "kernel_fallback".
"""
import ctypes
import json
import os
import re
import signal
import socketserver
import struct
import subprocess
import sys
import threading
import time

VERSION = "1.10.1-fake"
STATE_NOT_STARTED, STATE_RUNNING = "Not started", "Running"


class Fault(Exception):
    def __init__(self, msg, status=400):
        super().__init__(msg)
        self.msg, self.status = msg, status


def de_error(msg):
    return Fault("An error occurred when deserializing the json body of a request: %s." % msg)


# Field schemas: name -> (type check, type name for the message); required set.
def _is_str(v):
    return isinstance(v, str)


def _is_bool(v):
    return isinstance(v, bool)


def _is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_obj(v):
    return isinstance(v, dict)


def _opt(check):
    return lambda v: v is None or check(v)


SCHEMAS = {
    "boot-source": ({"kernel_image_path": (_is_str, "a string"),
                     "initrd_path": (_opt(_is_str), "a string"),
                     "boot_args": (_opt(_is_str), "a string")},
                    ["kernel_image_path"]),
    "machine-config": ({"vcpu_count": (_is_uint, "u8"),
                        "mem_size_mib": (_is_uint, "usize"),
                        "smt": (_is_bool, "a boolean"),
                        "cpu_template": (_opt(_is_str), "a string"),
                        "track_dirty_pages": (_is_bool, "a boolean"),
                        "huge_pages": (_is_str, "a string")},
                       ["vcpu_count", "mem_size_mib"]),
    "network-interfaces": ({"iface_id": (_is_str, "a string"),
                            "host_dev_name": (_is_str, "a string"),
                            "guest_mac": (_opt(_is_str), "a string"),
                            "mtu": (_opt(_is_uint), "u16"),
                            "rx_rate_limiter": (_opt(_is_obj), "struct RateLimiterConfig"),
                            "tx_rate_limiter": (_opt(_is_obj), "struct RateLimiterConfig")},
                           ["iface_id", "host_dev_name"]),
    "drives": ({"drive_id": (_is_str, "a string"),
                "partuuid": (_opt(_is_str), "a string"),
                "is_root_device": (_is_bool, "a boolean"),
                "cache_type": (_is_str, "a string"),
                "is_read_only": (_opt(_is_bool), "a boolean"),
                "path_on_host": (_opt(_is_str), "a string"),
                "rate_limiter": (_opt(_is_obj), "struct RateLimiterConfig"),
                "io_engine": (_opt(_is_str), "a string"),
                "socket": (_opt(_is_str), "a string")},
               ["drive_id", "is_root_device"]),
    "actions": ({"action_type": (_is_str, "a string")}, ["action_type"]),
}


def check_body(kind, body):
    """serde with deny_unknown_fields, in the order serde reports."""
    fields, required = SCHEMAS[kind]
    try:
        obj = json.loads(body)
    except ValueError as e:
        raise de_error(str(e))
    if not isinstance(obj, dict):
        raise de_error("invalid type: expected struct")
    for k, v in obj.items():
        if k not in fields:
            raise de_error("unknown field `%s`, expected one of %s"
                           % (k, ", ".join("`%s`" % f for f in fields)))
        check, tname = fields[k]
        if not check(v):
            raise de_error("invalid type: %s, expected %s" % (json.dumps(v), tname))
    for k in required:
        if k not in obj:
            raise de_error("missing field `%s`" % k)
    return obj


def can_open(path, write=False):
    try:
        os.close(os.open(path, os.O_RDWR if write else os.O_RDONLY))
        return None
    except OSError as e:
        return "%s (os error %d)" % (e.strerror, e.errno)


def has_pvh_note(path):
    """Does this ELF64 carry XEN_ELFNOTE_PHYS32_ENTRY (type 18, "Xen")?"""
    try:
        with open(path, "rb") as f:
            eh = f.read(64)
            if eh[:4] != b"\x7fELF" or eh[4] != 2:
                return False
            phoff, = struct.unpack_from("<Q", eh, 32)
            phentsize, phnum = struct.unpack_from("<HH", eh, 54)
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                p_type, _, p_offset, _, _, p_filesz = struct.unpack("<IIQQQQ", f.read(40))
                if p_type != 4:  # PT_NOTE
                    continue
                f.seek(p_offset)
                notes, off = f.read(p_filesz), 0
                while off + 12 <= len(notes):
                    namesz, descsz, ntype = struct.unpack_from("<III", notes, off)
                    name = notes[off + 12:off + 12 + namesz].rstrip(b"\0")
                    if name == b"Xen" and ntype == 18:
                        return True
                    off += 12 + ((namesz + 3) & ~3) + ((descsz + 3) & ~3)
    except (OSError, struct.error):
        return False
    return False


class VM:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.state = STATE_NOT_STARTED
        self.boot = None
        self.machine = {"vcpu_count": 1, "mem_size_mib": 128, "smt": False}
        self.nets = {}
        self.drives = {}
        self.qemu = None
        self.spawn_req = None
        self.spawn_wanted, self.spawned = threading.Event(), threading.Event()
        self.log_file = open(args["log-path"], "a") if args.get("log-path") else None
        self.fail = os.environ.get("FAKE_FC_FAIL", "")
        self.record_path = os.environ.get("FAKE_FC_LOG")

    def log(self, level, msg):
        line = "%s [%s:%s] %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.args.get("id", "anonymous-instance"),
                                    "fc_api", msg)
        if self.log_file:
            self.log_file.write(line)
            self.log_file.flush()
        else:
            # Firecracker logs to stdout without --log-path.
            sys.stdout.write(line)
            sys.stdout.flush()

    def record(self, entry):
        if not self.record_path:
            return
        with open(self.record_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    # ---- endpoints: return (status, body dict or None)
    def handle(self, method, path, body):
        tokens = [t for t in path.split("?")[0].split("/") if t]
        head = tokens[0] if tokens else ""
        if method == "GET" and head == "":
            return 200, {"id": self.args.get("id", "anonymous-instance"), "state": self.state,
                         "vmm_version": VERSION, "app_name": "Firecracker"}
        if method == "GET" and head == "machine-config":
            return 200, self.machine
        if method == "GET" and head == "version":
            return 200, {"firecracker_version": VERSION}
        if method != "PUT" or head not in SCHEMAS:
            raise Fault("Invalid request method and/or path: %s %s." % (method, path))
        if body is None or body == b"":
            raise Fault("Empty %s request." % method)
        obj = check_body(head, body)
        if self.fail == head:
            raise Fault("The kernel file cannot be opened: Permission denied (os error 13)"
                        if head == "boot-source" else
                        "FAKE_FC_FAIL=%s: refused as asked" % head)
        if head == "actions":
            return self.action(obj)
        if self.state != STATE_NOT_STARTED:
            raise Fault("The requested operation is not supported after starting the microVM.")
        if head in ("network-interfaces", "drives"):
            if len(tokens) < 2 or not tokens[1]:
                raise Fault("The ID cannot be empty.")
            if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", tokens[1]):
                raise Fault("Invalid ID: %s" % tokens[1])
            key = "iface_id" if head == "network-interfaces" else "drive_id"
            if obj[key] != tokens[1]:
                raise Fault("The id from the path [%s] does not match the id from the body [%s]!"
                            % (tokens[1], obj[key]))
        if head == "boot-source":
            err = can_open(obj["kernel_image_path"])
            if err:
                raise Fault("The kernel file cannot be opened: %s" % err)
            if obj.get("initrd_path"):
                err = can_open(obj["initrd_path"])
                if err:
                    raise Fault("The initrd file cannot be opened due to invalid path or invalid "
                                "permissions. %s" % err)
            self.boot = obj
        elif head == "machine-config":
            smt = obj.get("smt", False)
            v = obj["vcpu_count"]
            if v < 1 or v > 32 or (smt and v > 1 and v % 2):
                raise Fault("The number of vCPUs must be greater than 0, less than 32 and must be "
                            "1 or an even number if SMT is enabled.")
            if obj["mem_size_mib"] == 0:
                raise Fault("The memory size (MiB) is either 0, or not a multiple of the "
                            "configured page size.")
            self.machine = dict(obj, smt=smt)
        elif head == "network-interfaces":
            # Firecracker opens the tap with TUNSETIFF; an absent one is refused.
            if not os.path.exists("/sys/class/net/%s" % obj["host_dev_name"]):
                raise Fault("Could not create the network device: Open tap device failed: "
                            "No such device (os error 19)")
            self.nets[tokens[1]] = obj
        elif head == "drives":
            if obj.get("path_on_host") is None:
                raise Fault("Unable to create the block device: path_on_host is required")
            err = can_open(obj["path_on_host"], write=not obj.get("is_read_only", False))
            if err:
                raise Fault("Unable to create the virtio block device: %s" % err)
            self.drives[tokens[1]] = obj
        return 204, None

    def action(self, obj):
        at = obj["action_type"]
        if at not in ("FlushMetrics", "InstanceStart", "SendCtrlAltDel"):
            raise de_error("unknown variant `%s`, expected one of `FlushMetrics`, "
                           "`InstanceStart`, `SendCtrlAltDel`" % at)
        if at == "FlushMetrics":
            return 204, None
        if at == "SendCtrlAltDel":
            if self.state != STATE_RUNNING:
                raise Fault("The requested operation is not supported before starting the microVM.")
            self.qemu.send_signal(signal.SIGTERM)
            return 204, None
        if self.state != STATE_NOT_STARTED:
            raise Fault("The requested operation is not supported after starting the microVM.")
        if not self.boot:
            raise Fault("Cannot start microvm without kernel configuration.")
        self.start_qemu()
        self.state = STATE_RUNNING
        return 204, None

    def start_qemu(self):
        kernel = self.boot["kernel_image_path"]
        entry = {"event": "boot", "kernel": kernel}
        if not has_pvh_note(kernel):
            sib = os.path.join(os.path.dirname(kernel), "vmlinuz")
            if os.path.exists(sib):
                entry["kernel_fallback"] = sib
                kernel = sib
        argv = ["qemu-system-x86_64", "-M", "microvm", "-accel", "tcg", "-cpu", "qemu64",
                "-m", str(self.machine["mem_size_mib"]), "-smp", str(self.machine["vcpu_count"]),
                "-nodefaults", "-no-user-config", "-nographic", "-serial", "stdio", "-no-reboot",
                "-kernel", kernel]
        if self.boot.get("initrd_path"):
            argv += ["-initrd", self.boot["initrd_path"]]
        if self.boot.get("boot_args") is not None:
            argv += ["-append", self.boot["boot_args"]]
        for i, (iid, net) in enumerate(sorted(self.nets.items())):
            argv += ["-netdev", "tap,id=n%d,ifname=%s,script=no,downscript=no" % (i, net["host_dev_name"]),
                     "-device", "virtio-net-device,netdev=n%d" % i]
        for i, (did, d) in enumerate(sorted(self.drives.items())):
            ro = ",readonly=on" if d.get("is_read_only") else ""
            argv += ["-drive", "file=%s,if=none,format=raw,id=d%d,cache=unsafe%s" % (d["path_on_host"], i, ro),
                     "-device", "virtio-blk-device,drive=d%d" % i]
        entry["argv"] = argv
        self.record(entry)
        self.log("info", "Running the guest in QEMU: %s" % " ".join(argv))
        # PR_SET_PDEATHSIG fires when the parent *thread* ends, and this
        # handler's thread ends with its connection: the main thread spawns.
        self.spawn_req = argv
        self.spawned.clear()
        self.spawn_wanted.set()
        self.spawned.wait()
        if isinstance(self.qemu, Exception):
            raise Fault("Failed to start the VM: %s" % self.qemu)

    def spawn(self):
        libc = ctypes.CDLL(None, use_errno=True)

        def child():
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: QEMU goes with us
        try:
            # stdout inherited: the guest's serial console is ours, as in Firecracker.
            self.qemu = subprocess.Popen(self.spawn_req, stdin=subprocess.DEVNULL,
                                         preexec_fn=child, stderr=self.log_file or sys.stderr)
        except OSError as e:
            self.qemu = e
        self.spawned.set()


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        vm = self.server.vm
        while True:
            line = self.rfile.readline(65537)
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                continue
            parts = line.decode("latin-1").split()
            headers, clen = {}, 0
            while True:
                h = self.rfile.readline(65537)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            status, out, fault, body = 400, None, None, None
            try:
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    raise Fault("Invalid HTTP request line")
                method, path = parts[0], parts[1]
                # micro_http: only these media types.
                for k in ("content-type", "accept"):
                    if k in headers and headers[k] not in ("application/json", "text/plain"):
                        raise Fault("Unsupported %s: %s" % (k, headers[k]))
                if "transfer-encoding" in headers and headers["transfer-encoding"] != "identity":
                    raise Fault("Unsupported Transfer-Encoding")
                clen = int(headers.get("content-length", "0"))
                body = self.rfile.read(clen) if clen else None
                with vm.lock:
                    status, out = vm.handle(method, path, body)
            except Fault as f:
                status, fault = f.status, f.msg
                out = {"fault_message": f.msg}
            except Exception as e:  # a bug here must not look like success
                status, fault = 500, "fake firecracker: %r" % e
                out = {"fault_message": fault}
            try:
                rec_body = json.loads(body) if body else None
            except ValueError:
                rec_body = body.decode("latin-1") if isinstance(body, bytes) else None
            vm.record({"method": parts[0] if parts else "", "path": parts[1] if len(parts) > 1 else "",
                       "body": rec_body, "status": status, "fault_message": fault})
            vm.log("info", "API %s -> %d" % (line.strip().decode("latin-1"), status))
            reason = {200: "OK", 204: "No Content", 400: "Bad Request", 500: "Internal Server Error"}
            head = "HTTP/1.1 %d %s\r\nServer: Firecracker API\r\nConnection: keep-alive\r\n" % (
                status, reason.get(status, ""))
            payload = b""
            if out is not None:
                payload = json.dumps(out).encode()
                head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(payload)
            try:
                self.wfile.write(head.encode() + b"\r\n" + payload)
                self.wfile.flush()
            except OSError:  # the client left without reading the answer
                return


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def parse_args(argv):
    valued = {"api-sock", "id", "level", "log-path", "module", "config-file", "seccomp-filter",
              "start-time-us", "start-time-cpu-us", "parent-cpu-time-us", "metrics-path",
              "http-api-max-payload-size", "mmds-size-limit"}
    flags = {"show-level", "show-log-origin", "boot-timer", "no-seccomp", "no-api", "version",
             "help", "describe-snapshot", "enable-pci"}
    args, i = {"api-sock": "/run/firecracker.socket"}, 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            sys.exit("Arguments parsing error: Found argument '%s' which wasn't expected, "
                     "or isn't valid in this context." % a)
        k = a[2:]
        if "=" in k:
            k, v = k.split("=", 1)
        elif k in valued:
            if i + 1 >= len(argv):
                sys.exit("Arguments parsing error: The argument '--%s' requires a value, "
                         "but none was supplied" % k)
            i, v = i + 1, argv[i + 1]
        else:
            v = True
        if k not in valued and k not in flags:
            sys.exit("Arguments parsing error: Found argument '%s' which wasn't expected, "
                     "or isn't valid in this context." % a)
        args[k] = v
        i += 1
    if "level" in args and str(args["level"]).lower() not in (
            "off", "trace", "debug", "info", "warn", "warning", "error"):
        sys.exit("Invalid value for logger level: %s" % args["level"])
    if "id" in args and not re.fullmatch(r"[A-Za-z0-9-]{1,64}", args["id"]):
        sys.exit("Invalid instance ID: %s" % args["id"])
    return args


def main():
    args = parse_args(sys.argv[1:])
    if args.get("version"):
        print("Firecracker v%s" % VERSION)
        return 0
    if args.get("no-api"):
        sys.exit("fake firecracker: --no-api is not supported")
    vm = VM(args)
    sock = args["api-sock"]
    try:
        srv = Server(sock, Handler)
    except OSError as e:
        vm.log("error", "Failed to open the API socket at: %s. Check that it is not already "
               "used. %s" % (sock, e))
        return 1
    srv.vm = vm
    vm.log("info", "Running Firecracker v%s" % VERSION)
    def on_term(signum, frame):
        if isinstance(vm.qemu, subprocess.Popen):
            vm.qemu.kill()
        os._exit(128 + signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    # Until InstanceStart, then until the guest is gone.
    while True:
        vm.spawn_wanted.wait()
        vm.spawn_wanted.clear()
        vm.spawn()
        if isinstance(vm.qemu, subprocess.Popen):
            break
    rc = vm.qemu.wait()
    vm.log("info", "Vmm is stopping (QEMU exit %d)" % rc)
    vm.record({"event": "exit", "qemu_status": rc})
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
