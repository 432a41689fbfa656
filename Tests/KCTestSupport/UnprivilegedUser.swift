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

    /// A copy of the built `kc` that the test user may run (the build folder may not be
    /// readable by other users), with the Swift runtime it links against.
    public static var kcCopy: String {
        let directory = "/tmp/kc-test-bin-\(getpid())"
        let copy = directory + "/kc"
        if !FileManager.default.fileExists(atPath: copy) {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                     attributes: [.posixPermissions: 0o755])
            try? FileManager.default.copyItem(atPath: builtKC, toPath: copy)
            try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy)
        }
        return copy
    }

    /// Debian's udev rule makes /dev/fuse mode 0666; where it is not (some VMs keep
    /// 0600), libfuse cannot mount for an ordinary user. Grant the test user alone
    /// read and write with an ACL, as the usual mode grants every user. False if that
    /// is impossible here.
    public static func grantFUSEDevice() -> Bool {
        let check = "test -r /dev/fuse && test -w /dev/fuse"
        if (try? runCommand("/usr/sbin/runuser", ["-u", name, "--", "/bin/sh", "-c", check]))?.status == 0 { return true }
        _ = try? runCommand("/usr/bin/env", ["setfacl", "-m", "u:\(name):rw", "/dev/fuse"])
        return (try? runCommand("/usr/sbin/runuser", ["-u", name, "--", "/bin/sh", "-c", check]))?.status == 0
    }

    /// Runs `script` with `sh` as the test user in a fresh session keyring; `$KC` is kc.
    public static func run(_ script: String, input: [UInt8] = []) throws -> CommandResult {
        let wrapped = "KC=\(kcCopy); export KC; cd /tmp; \(script)"
        return try runCommand("/usr/sbin/runuser", ["-u", name, "--", "keyctl", "session", "-", "/bin/sh", "-c", wrapped], input: input)
    }
}
