import Foundation

/// An unprivileged account for the tests that must not run as root. When the suite
/// runs as root it creates `kc-test` (no home, no login shell) once; when it already
/// runs unprivileged those tests run as the caller and the cross-uid checks skip.
public enum UnprivilegedUser {
    public static let name = "kc-test"

    /// True when the suite runs as root and can act as the test user.
    public static var available: Bool { getuid() == 0 && ensureExists() }

    nonisolated(unsafe) private static var created: Bool?

    private static func ensureExists() -> Bool {
        if let created { return created }
        var ok = (try? runCommand("/usr/bin/id", ["-u", name]))?.status == 0
        if !ok {
            ok = (try? runCommand("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]))?.status == 0
        }
        created = ok
        return ok
    }

    /// A copy of the built `kc` (with `kc-mountd` and the library probe) that the test users may run: the build
    /// folder may not be readable by other users.
    public static var kcCopy: String {
        let directory = "/tmp/kc-test-bin-\(getpid())"
        let copy = directory + "/kc"
        if !FileManager.default.fileExists(atPath: copy) {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                     attributes: [.posixPermissions: 0o755])
            // kc and the mount daemon it starts from the same folder.
            // Through the front, kc is the front and the full kc is kc-full beside it.
            let built = builtFolder
            var programs = [(builtKC, "kc"), (built + "/kc-mountd", "kc-mountd"), (built + "/kc-keychain-probe", "kc-keychain-probe")]
            if runsThroughTheFront { programs.append((builtFullKC, "kc-full")) }
            for (source, program) in programs {
                try? FileManager.default.copyItem(atPath: source, toPath: directory + "/" + program)
                try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory + "/" + program)
            }
        }
        return copy
    }

    /// Debian's udev rule makes /dev/fuse mode 0666; where it is not (some VMs keep
    /// 0600), libfuse cannot mount for an ordinary user. Grant the test user alone
    /// read and write with an ACL, as the usual mode grants every user. False if that
    /// is impossible here.
    public static func grantFUSEDevice(to user: String = name) -> Bool {
        let check = "test -r /dev/fuse && test -w /dev/fuse"
        if (try? runCommand("/usr/sbin/runuser", ["-u", user, "--", "/bin/sh", "-c", check]))?.status == 0 { return true }
        _ = try? runCommand("/usr/bin/env", ["setfacl", "-m", "u:\(user):rw", "/dev/fuse"])
        return (try? runCommand("/usr/sbin/runuser", ["-u", user, "--", "/bin/sh", "-c", check]))?.status == 0
    }

    /// Runs `script` with `sh` as the test user, by default in a fresh session keyring
    /// (which costs one key of the user's quota); `$KC` is kc.
    public static func run(_ script: String, input: [UInt8] = [], freshSession: Bool = true) throws -> CommandResult {
        let wrapped = "KC=\(kcCopy); export KC; cd /tmp; \(script)"
        let session = freshSession ? ["keyctl", "session", "-"] : []
        return try runCommand("/usr/sbin/runuser", ["-u", name, "--"] + session + ["/bin/sh", "-c", wrapped], input: input)
    }

    /// The kernel frees the keys of a dead session asynchronously; tests that filled
    /// the quota wait for it so the next test starts with room (at most 10 s).
    public static func waitForKeyCollection() {
        guard let uid = try? runCommand("/usr/bin/id", ["-u", name]).output.trimmingCharacters(in: .whitespacesAndNewlines) else { return }
        for _ in 0..<200 {
            let line = (try? String(contentsOfFile: "/proc/key-users", encoding: .utf8))?
                .split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(uid + ":") }
            let used = line.flatMap { $0.split(separator: " ").dropFirst(3).first?.split(separator: "/").first }.flatMap { Int($0) } ?? 0
            if used < 10 { return }
            usleep(50_000)
        }
    }
}
