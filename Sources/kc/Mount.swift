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
            let path = absolutePath(mountpoint)
            recoverStaleMount(path)
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                standardError("kc: \(path) is not a directory; create it first: mkdir -p \(path)")
                throw ExitStatus.failure
            }
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

        /// `kc-mountd`, installed next to `kc`.
        private var daemonPath: String { siblingExecutable("kc-mountd") }

        private func daemonArguments(_ path: String) throws -> [String] {
            var arguments = ["--access", level.rawValue]
            if readOnly { arguments.append("--read-only") }
            if allowOther { arguments.append("--allow-other") }
            if shared { arguments.append("--shared") }
            if let service {
                let bytes = try RawArguments.exactNames([service])[0].bytes
                arguments += ["--service-hex", bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()]
            }
            return arguments + ["--", path]
        }

        /// Starts the daemon and returns once it reports the mount ready (exit 0) or fails
        /// (exit 2, its message already printed).
        private func startInBackground(_ daemonArguments: [String]) throws -> Never {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else {
                standardError("kc: cannot create a pipe: \(String(cString: strerror(errno)))")
                throw ExitStatus.failure
            }
            let child = spawn(daemonPath, ["--ready-fd", "3"] + daemonArguments, closingInChild: [ends[0]], movingToThree: ends[1])
            close(ends[1])
            guard child != nil else {
                standardError("kc: cannot start \(daemonPath); reinstall kc (./Tools/setup.sh)")
                throw ExitStatus.failure
            }
            var message = [UInt8](repeating: 0, count: 16)
            var received = 0
            while received < message.count {
                let count = read(ends[0], &message[received], message.count - received)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                received += count
            }
            close(ends[0])
            if message.starts(with: Array("ready".utf8)) { Glibc.exit(0) }
            throw ExitStatus.failure
        }
    }

    struct Umount: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unmount a kc mount (the daemon then exits).",
            discussion: "The same as 'fusermount3 -u MOUNTPOINT'. Nothing is lost: items live in the kernel."
        )

        @Argument(help: "Where kc is mounted.", completion: .directory)
        var mountpoint: String

        func run() throws {
            let path = absolutePath(mountpoint)
            guard let status = runToCompletion("fusermount3", ["-u", path]) else {
                standardError("kc: cannot run fusermount3; install the fuse3 package")
                throw ExitStatus.failure
            }
            if status != 0 {
                standardError("kc: cannot unmount \(path) (fusermount3 said why above); is kc mounted there?")
                throw ExitStatus.failure
            }
        }
    }
}

/// `path` made absolute against the working directory, without resolving links
/// (a stale mount point cannot be resolved).
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    return String(cString: buffer) + "/" + path
}

/// A daemon killed with SIGKILL leaves its mount behind, answering "Transport endpoint
/// is not connected". Detach it so the new mount can take its place.
func recoverStaleMount(_ path: String) {
    var info = stat()
    guard stat(path, &info) != 0, errno == ENOTCONN else { return }
    standardError("kc: \(path) was left mounted by a daemon that died; detaching it")
    _ = runToCompletion("fusermount3", ["-u", "-z", path])
}
