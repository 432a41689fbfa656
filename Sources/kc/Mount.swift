import ArgumentParser
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    struct Mount: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the keychain as files: one directory per service, one file per item.",
            discussion: """
            Returns once the mount is ready and keeps serving in the background; stop it
            with 'kc umount MOUNTPOINT'. 'cat' reads a value, 'printf v > f' sets it (stored
            when the file is closed), 'rm' removes it, 'mkdir'/'rmdir' make and remove
            services, 'mv' renames. Extended attributes user.kc.access,
            user.kc.this-device-only, user.kc.timeout and user.kc.serial show and change
            an item's level, marking and expiry. Nothing is cached: a change made with
            'kc set' shows at once. Only you can use the mount unless --allow-other.
            With --foreground under systemd (Type=notify), READY=1 is sent to
            $NOTIFY_SOCKET once the mount answers.

              mkdir -p ~/kc && kc mount ~/kc && cat ~/kc/com.example/token
            """
        )

        @Argument(help: "An existing directory to mount on.", completion: .directory)
        var mountpoint: String

        @Flag(help: "Serve in the foreground until unmounted or interrupted (for supervisors).")
        var foreground = false

        @Flag(help: "Refuse every change (EROFS); files show mode 0400.")
        var readOnly = false

        @Option(help: "Mount only this service: its items are the files at the mount's root.")
        var service: String?

        @Flag(help: "Let other users (root included) use the mount; unprivileged users need 'user_allow_other' in /etc/fuse.conf.")
        var allowOther = false

        @Flag(help: "Also show services other users share with you, read-only, under shared/<owner>/<service>/.")
        var shared = false

        @Flag(help: "Log one line per open of an item file (reader's pid, uid, executable; service and item; never the value) to the journal, else syslog (authpriv).")
        var audit = false

        @Option(name: .customLong("access"), help: ArgumentHelp(
            "Level of files created through the mount: when-unlocked (default), after-first-unlock, always.",
            valueName: "level"))
        var level: Accessibility.Level = .whenUnlocked

        func validate() throws {
            if let service { try validateArgument(RawArguments.exactNames([service])[0], as: .service) }
            if shared && service != nil {
                throw ValidationError("--shared shows other users' services beside yours; it cannot be combined with --service")
            }
        }

        func run() throws {
            if shared, (try? Keychain(service: "shared").serviceExists()) == true {
                standardError("kc: warning: your service 'shared' is hidden under --shared (shared/ lists other users' services); reach it with kc get shared KEY")
            }
            let path = try checkedMountPoint().path
            let arguments = try daemonArguments(path)
            if foreground {
                // The daemon takes this process's place, so a supervisor's signals reach it.
                let argv: [UnsafeMutablePointer<CChar>?] = ([daemonPath] + arguments).map { (text: String) in strdup(text) } + [nil]
                execv(daemonPath, argv)
                standardError("kc: cannot run \(daemonPath): \(String(cString: strerror(errno))); reinstall kc (./Tools/setup.sh)")
                throw ExitStatus.failure
            }
            try startInBackground(arguments)
        }

        /// The mount point, resolved once, if kc may mount there: a directory, not a
        /// link, and no kc mount there already. Stacking a second daemon on a live kc
        /// mount is refused rather than skipped (exit 0): the mount there may have other
        /// options (--read-only, --service), so succeeding would claim what is not so.
        /// A non-empty directory is mounted over, as libfuse 3 does, with a warning: the
        /// files hidden may be ones a program wrote there while kc was not mounted.
        private func checkedMountPoint() throws -> MountPoint {
            let point = try resolvedMountPoint(mountpoint) { named in
                "\(named) is not a directory; create it first: mkdir -p \(named)"
            }
            let path = point.path
            switch point.lookUp() {
            case .symbolicLink:
                try refuse("\(path) is a symbolic link; name the mount point itself")
            case .mountPoint(let entry) where entry.isKC:
                try detachStaleOrRefuse(point, entry)
            case .missing, .mountPoint, .notMountPoint:
                break
            }
            switch point.probe(countingEntries: true) {
            case .directory(let entries):
                if entries > 0 {
                    standardError("kc: warning: \(path) is not empty: its \(entries) \(entries == 1 ? "entry stays" : "entries stay") hidden until kc umount \(path)")
                }
                return point
            case .noAnswer:
                try refuse("\(path) does not answer within \(MountPoint.answerTimeout) s; is another filesystem mounted there?")
            case .notDirectory, .failed:
                try refuse("\(path) is not a directory; create it first: mkdir -p \(path)")
            }
        }

        /// A daemon killed with SIGKILL leaves its mount behind, answering "Transport
        /// endpoint is not connected": detach it (if it is the caller's) so the new mount
        /// can take its place. A kc mount that answers, or does not answer at all, stays.
        private func detachStaleOrRefuse(_ point: MountPoint, _ entry: MountEntry) throws {
            let path = point.path
            let owner = entry.fuseOwner.map(Int.init) ?? -1
            switch point.probe(countingEntries: false) {
            case .noAnswer:
                try refuse("\(path) \(unansweredMountDetail(path))")
            case .failed(errno: ENOTCONN) where owner == Int(getuid()):
                standardError("kc: \(path) was left mounted by a daemon that died; detaching it")
                if let failure = point.unmount(lazy: true) { try refuse("cannot detach \(path): \(failure)") }
            case _ where owner != Int(getuid()):
                try refuse("\(path) is already a kc mount of uid \(owner); mount on another directory")
            default:
                let daemon = MountDaemonProcess.serving(path).map { " (kc-mountd pid \($0.pid))" } ?? ""
                try refuse("\(path) is already a kc mount\(daemon); unmount it first: kc umount \(path)")
            }
        }

        /// `kc-mountd`, installed next to `kc`.
        private var daemonPath: String { siblingExecutable("kc-mountd") }

        private func daemonArguments(_ path: String) throws -> [String] {
            var arguments = ["--access", level.rawValue]
            if readOnly { arguments.append("--read-only") }
            if allowOther { arguments.append("--allow-other") }
            if shared { arguments.append("--shared") }
            if audit { arguments.append("--audit") }
            if let service {
                let bytes = try RawArguments.exactNames([service])[0].bytes
                arguments += ["--service-hex", bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()]
            }
            return arguments + ["--", path]
        }

        /// Starts the daemon and returns once it reports the mount ready (exit 0) or fails
        /// (exit 2, its message already printed).
        private func startInBackground(_ daemonArguments: [String]) throws -> Never {
            guard let ends = closeOnExecPipe() else {
                standardError("kc: cannot create a pipe: \(String(cString: strerror(errno)))")
                throw ExitStatus.failure
            }
            let child = spawn(daemonPath, ["--ready-fd", "3"] + daemonArguments, movingToThree: ends.write)
            close(ends.write)
            guard child != nil else {
                standardError("kc: cannot start \(daemonPath); reinstall kc (./Tools/setup.sh)")
                throw ExitStatus.failure
            }
            var message = [UInt8](repeating: 0, count: 16)
            var received = 0
            while received < message.count {
                let count = read(ends.read, &message[received], message.count - received)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                received += count
            }
            close(ends.read)
            if message.starts(with: Array("ready".utf8)) { Glibc.exit(0) }
            throw ExitStatus.failure
        }
    }

    struct Umount: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unmount a kc mount (the daemon then exits).",
            discussion: "Unmounts only your own kc mount: never another filesystem or another user's mount (root can force one with 'fusermount3 -u MOUNTPOINT'). Nothing is lost: items live in the kernel."
        )

        @Argument(help: "Where kc is mounted.", completion: .directory)
        var mountpoint: String

        /// Unmounts only a kc mount (`fuse.kc` in mountinfo) of the caller's own uid,
        /// root included: `fusermount3 -u` run by root unmounts anything, a tmpfs too.
        /// Root can still force another user's mount with `fusermount3 -u`.
        func run() throws {
            let point = try resolvedMountPoint(mountpoint)
            let path = point.path
            switch point.lookUp() {
            case .symbolicLink:
                try refuse("\(path) is a symbolic link; name the mount point itself")
            case .missing(let code):
                try refuse("cannot unmount \(path): \(String(cString: strerror(code)))")
            case .notMountPoint:
                try refuse("\(path) is not a mount point")
            case .mountPoint(let entry) where !entry.isKC:
                try refuse("\(path) is a \(entry.filesystemType) mount, not a kc mount; kc umount unmounts only kc mounts")
            case .mountPoint(let entry) where entry.fuseOwner != getuid():
                try refuse("\(path) is a kc mount of uid \(entry.fuseOwner.map(String.init) ?? "?"), not yours; "
                    + "kc umount unmounts only your own (root can force it: fusermount3 -u \(path))")
            case .mountPoint:
                if let failure = point.unmount(lazy: false) { try refuse("cannot unmount \(path): \(failure)") }
            }
        }
    }
}

/// Resolves a mount point named on the command line, or reports why not (exit 2),
/// with `missing` saying what to do when a directory in its path does not exist.
func resolvedMountPoint(_ named: String, missing: ((String) -> String)? = nil) throws -> MountPoint {
    do {
        return try MountPoint(resolving: named)
    } catch {
        if let missing, error.code == ENOENT || error.code == ENOTDIR { try refuse(missing(error.named)) }
        try refuse(error.description)
    }
}

/// Prints one `kc: ` line and fails with exit 2.
func refuse(_ reason: String) throws -> Never {
    standardError("kc: " + reason)
    throw ExitStatus.failure
}

/// `path` made absolute against the working directory, without resolving links
/// (a stale mount point cannot be resolved).
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    return String(cString: buffer) + "/" + path
}
