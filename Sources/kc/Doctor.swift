import ArgumentParser
import KernelKeychain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension KC {
    struct Doctor: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the keyrings, the key quota and FUSE on this machine.",
            discussion: """
            One line per check: ok, warn or fail, then what was found and what to do.
            Exits 2 if any check fails. --json (stable): {"checks": [{"name", "status", "detail"}]}.
            """
        )

        @Flag(help: "Print JSON (see the schema above).")
        var json = false

        func run() throws {
            let checks = KeyringDiagnostics.run() + [fuseDevice(), fusermount(), mountDaemon(), secretService()] + liveMounts()
            if json {
                try printJSON(CheckList(checks: checks.map(CheckEntry.init)))
            } else {
                for check in checks {
                    let label = check.status.rawValue.padding(toLength: 5)
                    print("\(label)\(check.name): \(check.detail)")
                }
            }
            if checks.contains(where: { $0.status == .fail }) { throw ExitStatus.failure }
        }

        /// Whether 'kc mount' can open /dev/fuse, and if not, which of two problems it
        /// is, since their fixes differ: the device is missing (the fuse module is not
        /// loaded), or present but closed to this user (its mode or ACL; or, with EPERM,
        /// a container's device rules).
        private func fuseDevice() -> DiagnosticCheck {
            let path = "/dev/fuse"
            let fd = open(path, O_RDWR | O_CLOEXEC)
            if fd >= 0 {
                close(fd)
                return DiagnosticCheck(name: path, status: .ok, detail: "present and openable")
            }
            let openError = errno
            let reason = String(cString: strerror(openError))
            var info = stat()
            guard stat(path, &info) == 0 else {
                return DiagnosticCheck(name: path, status: .warn, detail:
                    "missing, so 'kc mount' cannot work: load the fuse module with 'sudo modprobe fuse' (in a container, pass --device /dev/fuse)")
            }
            switch openError {
            case EACCES:
                let user = userName(getuid())
                let group = groupName(info.st_gid)
                var detail = "present but not open to you (\(reason) by its mode or ACL; mode 0\(String(info.st_mode & 0o777, radix: 8)), owner \(userName(info.st_uid)), group \(group)), so 'kc mount' cannot work: grant it with 'sudo setfacl -m u:\(user):rw \(path)' (until reboot)"
                if info.st_gid != 0 && info.st_mode & 0o060 == 0o060 {
                    detail += ", or join its group with 'sudo usermod -aG \(group) \(user)' (then log in again)"
                }
                detail += "; for good, Debian's udev package gives it mode 0666 (the rule KERNEL==\"fuse\", MODE=\"0666\")"
                return DiagnosticCheck(name: path, status: .warn, detail: detail)
            case EPERM:
                return DiagnosticCheck(name: path, status: .warn, detail:
                    "present but not open to this process (\(reason): not its mode but a container's device rules or a security module), so 'kc mount' cannot work: run the container with --device /dev/fuse")
            case ENODEV, ENXIO:
                return DiagnosticCheck(name: path, status: .warn, detail:
                    "present but no driver answers it (\(reason)), so 'kc mount' cannot work: load the fuse module with 'sudo modprobe fuse'")
            default:
                return DiagnosticCheck(name: path, status: .warn, detail: "present but cannot be opened (\(reason)), so 'kc mount' cannot work")
            }
        }

        /// One line for each kc mount of the caller's: whether it answers a stat within
        /// ``MountPoint/answerTimeout`` (asked on a thread of its own, so a stopped
        /// daemon cannot hang kc doctor), and if not, how to recover. None without mounts.
        private func liveMounts() -> [DiagnosticCheck] {
            MountTable.entries().filter { $0.isKC && $0.fuseOwner == getuid() }.map { entry in
                let name = "mount \(entry.mountPoint)"
                guard let point = try? MountPoint(resolving: entry.mountPoint) else {
                    return DiagnosticCheck(name: name, status: .warn, detail: "cannot open its parent directory")
                }
                switch point.probe(countingEntries: false) {
                case .noAnswer:
                    return DiagnosticCheck(name: name, status: .fail, detail: unansweredMountDetail(point.path))
                case .failed(errno: ENOTCONN):
                    return DiagnosticCheck(name: name, status: .warn, detail:
                        "left behind by a daemon that died; kc mount \(point.path) detaches it (or fusermount3 -u -z \(point.path))")
                case .failed(let code):
                    return DiagnosticCheck(name: name, status: .warn, detail: String(cString: strerror(code)))
                case .directory, .notDirectory:
                    let daemon = MountDaemonProcess.serving(point.path).map { " (kc-mountd pid \($0.pid))" } ?? ""
                    return DiagnosticCheck(name: name, status: .ok, detail: "answers" + daemon)
                }
            }
        }

        private func mountDaemon() -> DiagnosticCheck {
            let daemon = siblingExecutable("kc-mountd")
            if access(daemon, X_OK) == 0 {
                return DiagnosticCheck(name: "kc-mountd", status: .ok, detail: daemon)
            }
            return DiagnosticCheck(name: "kc-mountd", status: .warn, detail:
                "\(daemon) is missing: 'kc mount' needs it next to kc; reinstall with ./Tools/setup.sh")
        }

        /// Whether the Secret Service on this session bus is kc's and answers
        /// (`kc-secretd status`, which speaks D-Bus; kc itself links no D-Bus library).
        private func secretService() -> DiagnosticCheck {
            let name = "secret service"
            let daemon = siblingExecutable("kc-secretd")
            guard access(daemon, X_OK) == 0 else {
                return DiagnosticCheck(name: name, status: .warn, detail:
                    "\(daemon) is missing: programs that use the Secret Service (secret-tool, libsecret) cannot reach kc; install it with ./Tools/setup.sh")
            }
            guard let (status, output) = runCapturingOutput(daemon, ["status"]) else {
                return DiagnosticCheck(name: name, status: .warn, detail: "\(daemon) status did not run")
            }
            let detail = output.split(separator: "\n").joined(separator: "; ")
            return DiagnosticCheck(name: name, status: status == 0 ? .ok : .warn, detail: detail)
        }

        private func fusermount() -> DiagnosticCheck {
            let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
            for directory in path.split(separator: ":") {
                let candidate = "\(directory)/fusermount3"
                var info = stat()
                guard stat(candidate, &info) == 0 else { continue }
                let setuid = info.st_mode & S_ISUID != 0 && info.st_uid == 0
                if getuid() == 0 || setuid {
                    return DiagnosticCheck(name: "fusermount3", status: .ok, detail: candidate + (setuid ? " (setuid root)" : ""))
                }
                return DiagnosticCheck(name: "fusermount3", status: .warn, detail:
                    "\(candidate) is not setuid root, so unprivileged mounts fail; reinstall the fuse3 package")
            }
            return DiagnosticCheck(name: "fusermount3", status: .warn, detail: "not on PATH: install the fuse3 package to use 'kc mount'")
        }
    }
}

struct CheckList: Encodable {
    var checks: [CheckEntry]
}

struct CheckEntry: Encodable {
    var name: String
    var status: String
    var detail: String

    init(_ check: DiagnosticCheck) {
        name = check.name
        status = check.status.rawValue
        detail = check.detail
    }
}

extension String {
    func padding(toLength length: Int) -> String {
        count >= length ? self + " " : self + String(repeating: " ", count: length - count)
    }
}

/// A user's name for a message, else the uid.
private func userName(_ uid: uid_t) -> String {
    getpwuid(uid).map { String(cString: $0.pointee.pw_name) } ?? String(uid)
}

/// A group's name for a message, else the gid.
private func groupName(_ gid: gid_t) -> String {
    getgrgid(gid).map { String(cString: $0.pointee.gr_name) } ?? String(gid)
}
