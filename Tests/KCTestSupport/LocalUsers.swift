import Foundation

/// Throwaway local users for the attack tests, made once when the suite runs as root:
/// alice, bob and dave share the group `grp`; carol is an outsider. Each has no home
/// and no login shell. Where the suite is not root, tests that need them skip.
public enum LocalUser: String, CaseIterable, Sendable {
    case alice = "kc-sec-alice"
    case bob = "kc-sec-bob"
    case dave = "kc-sec-dave"
    case carol = "kc-sec-carol"

    /// The group alice, bob and dave are in, and carol is not.
    public static let group = "kc-sec-grp"

    /// True when the suite runs as root and the users exist (made now if needed).
    public static var available: Bool { getuid() == 0 && ensureExist() }

    nonisolated(unsafe) private static var created: Bool?

    private static func ensureExist() -> Bool {
        if let created { return created }
        var ok = (try? runCommand("/usr/bin/getent", ["group", group]))?.status == 0
            || (try? runCommand("/usr/sbin/groupadd", ["--system", group]))?.status == 0
        for user in allCases where ok {
            if (try? runCommand("/usr/bin/id", ["-u", user.rawValue]))?.status == 0 { continue }
            var arguments = ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
            if user != .carol { arguments += ["--groups", group] }
            ok = (try? runCommand("/usr/sbin/useradd", arguments + [user.rawValue]))?.status == 0
        }
        created = ok
        return ok
    }

    public var uid: UInt32 {
        UInt32((try? runCommand("/usr/bin/id", ["-u", rawValue]))?.output.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? UInt32.max
    }

    /// Runs `script` with `sh` as this user, by default in a fresh session keyring;
    /// `$KC` is kc (a copy every user may run).
    @discardableResult
    public func run(_ script: String, input: [UInt8] = [], freshSession: Bool = true) throws -> CommandResult {
        let wrapped = "KC=\(UnprivilegedUser.kcCopy); export KC; cd /tmp; \(script)"
        let session = freshSession ? ["keyctl", "session", "-"] : []
        return try runCommand("/usr/sbin/runuser", ["-u", rawValue, "--"] + session + ["/bin/sh", "-c", wrapped], input: input)
    }

    /// Removes everything kc and keyctl left in this user's user and persistent keyrings,
    /// so one test's items never fill the next one's quota.
    public func clearKeyrings() {
        _ = try? run("keyctl clear @u; keyctl clear $(keyctl get_persistent @s) 2>/dev/null; true")
    }
}
