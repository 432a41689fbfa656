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
    public static var available: Bool {
        if let created { return created }
        let made = getuid() == 0 && allCases.allSatisfy { $0.account.ensure() }
        created = made
        return made
    }

    nonisolated(unsafe) private static var created: Bool?

    private var account: TestAccount {
        TestAccount(rawValue, groups: self == .carol ? [] : [Self.group])
    }

    public var uid: UInt32 { UInt32(account.uid) ?? UInt32.max }

    /// Runs `script` with `sh` as this user, by default in a fresh session keyring;
    /// `$KC` is kc (a copy every user may run) and `$PROBE` the library probe.
    @discardableResult
    public func run(_ script: String, input: [UInt8] = [], freshSession: Bool = true) throws -> CommandResult {
        try account.run(script, input: input, freshSession: freshSession)
    }

    /// Removes everything kc and keyctl left in this user's user and persistent keyrings,
    /// so one test's items never fill the next one's quota.
    public func clearKeyrings() {
        _ = try? run("keyctl clear @u; keyctl clear $(keyctl get_persistent @s) 2>/dev/null; true")
    }
}
