import Foundation

/// A system account the sharing tests act as, created (with its groups) when the suite
/// runs as root. `kc-test` owns shared services; `kc-test-member` shares the group
/// `kc-test-share` with it; `kc-test-outsider` is in no group of theirs.
public struct TestAccount: Sendable {
    public let name: String
    public let groups: [String]

    public static let shareGroup = "kc-test-share"
    public static let owner = TestAccount(UnprivilegedUser.name, groups: [shareGroup])
    public static let member = TestAccount("kc-test-member", groups: [shareGroup])
    public static let outsider = TestAccount("kc-test-outsider", groups: [])
    /// A second owner in the group, for two services of one name.
    public static let secondOwner = TestAccount("kc-test-owner2", groups: [shareGroup])

    public init(_ name: String, groups: [String]) {
        self.name = name
        self.groups = groups
    }

    /// Creates the account and its group memberships if missing; false if impossible
    /// (not root, or no useradd).
    public func ensure() -> Bool {
        guard getuid() == 0 else { return false }
        if (try? runCommand("/usr/bin/id", ["-u", name]))?.status != 0 {
            let made = try? runCommand("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
            guard made?.status == 0 else { return false }
        }
        for group in groups {
            if (try? runCommand("/usr/bin/getent", ["group", group]))?.status != 0 {
                _ = try? runCommand("/usr/sbin/groupadd", ["--system", group])
            }
            let current = (try? runCommand("/usr/bin/id", ["-nG", name]))?.output ?? ""
            if !current.split(separator: " ").contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines) == group }) {
                guard (try? runCommand("/usr/sbin/usermod", ["-aG", group, name]))?.status == 0 else { return false }
            }
        }
        return true
    }

    public var uid: String {
        ((try? runCommand("/usr/bin/id", ["-u", name]))?.output ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `script` with `sh` as this user (runuser sets its supplementary groups from
    /// the group database), by default in a fresh session keyring. `$KC` is kc and
    /// `$PROBE` the library probe.
    public func run(_ script: String, input: [UInt8] = [], freshSession: Bool = true) throws -> CommandResult {
        let directory = URL(fileURLWithPath: UnprivilegedUser.kcCopy).deletingLastPathComponent().path
        let wrapped = "KC=\(directory)/kc; PROBE=\(directory)/kc-keychain-probe; export KC PROBE; cd /tmp; \(script)"
        let session = freshSession ? ["keyctl", "session", "-"] : []
        return try runCommand("/usr/sbin/runuser", ["-u", name, "--"] + session + ["/bin/sh", "-c", wrapped], input: input)
    }
}
