import Foundation
import XCTest

/// Real podman for the container tests: runc (crun refuses hybrid cgroups on some
/// machines), explicit ulimits (some machines refuse podman's defaults), no network,
/// and a root filesystem made from Debian's busybox-static instead of an image pull.
public enum Podman {
    nonisolated(unsafe) private static var checked: String??

    public static let runOptions = ["--rm", "--runtime", "runc", "--network", "none",
                                    "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]

    /// Podman run by an ordinary user runs rootless: in a user namespace of its own,
    /// where uid 0 is the user.
    public static var isRootless: Bool { getuid() != 0 }

    /// The root filesystem directory, or XCTSkip with the reason podman cannot run here.
    public static func rootfs() throws -> String {
        if case .some(let result) = checked {
            guard let path = result else { throw XCTSkip("podman cannot run containers here (see the first podman test's output)") }
            return path
        }
        guard programExists("podman"), FileManager.default.fileExists(atPath: "/bin/busybox") else {
            checked = .some(nil)
            throw XCTSkip("podman and busybox-static are not installed")
        }
        let path = "/tmp/kc-test-rootfs-\(getpid())"
        for directory in ["bin", "run", "proc", "sys", "dev", "etc", "tmp"] {
            try FileManager.default.createDirectory(atPath: path + "/" + directory, withIntermediateDirectories: true)
        }
        if !FileManager.default.fileExists(atPath: path + "/bin/busybox") {
            try FileManager.default.copyItem(atPath: "/bin/busybox", toPath: path + "/bin/busybox")
            for tool in ["sh", "cat", "echo", "ls", "printf", "env"] {
                try FileManager.default.createSymbolicLink(atPath: path + "/bin/" + tool, withDestinationPath: "busybox")
            }
        }
        let probe = try run(["/bin/echo", "ok"], rootfs: path)
        guard probe.status == 0, probe.output == "ok\n" else {
            checked = .some(nil)
            throw XCTSkip("podman cannot run a container here: \(probe.standardError)")
        }
        checked = .some(path)
        return path
    }

    /// `podman run [options] --rootfs ROOTFS command...`
    public static func run(_ command: [String], options: [String] = [], rootfs: String) throws -> CommandResult {
        try runCommand("/usr/bin/env", ["podman", "run"] + runOptions + options + ["--rootfs", rootfs] + command)
    }

    @discardableResult
    public static func command(_ arguments: [String], input: [UInt8] = []) throws -> CommandResult {
        try runCommand("/usr/bin/env", ["podman"] + arguments, input: input)
    }
}
