import ArgumentParser
import KernelKeychain
import Keyrings

/// `--group` and `--from`: reach a service another user shares with you.
struct SharedServiceOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "A Unix group you are in: use the service shared through it (yours if you have one; a write shares yours with it).",
        valueName: "group"))
    var group: String?

    @Option(name: .customLong("from"), help: ArgumentHelp(
        "Use the service this user shares with you (a user name or uid).", valueName: "user"))
    var owner: String?

    /// The options as typed, for hints: `--group G ` and/or `--from U `.
    var commandLine: String { sharedOptionsHint(group: group, owner: owner) }

    /// The keychain these options name for `service`.
    func keychain(
        _ service: some KeyNameConvertible, accessibility: Accessibility? = nil, timeout: Duration? = nil, groupWritable: Bool = false
    ) throws(KeychainError) -> Keychain {
        try openKeychain(service, accessibility: accessibility, timeout: timeout, group: group, owner: owner, groupWritable: groupWritable)
    }
}

/// `--group G ` and/or `--from U `, as typed, for hints.
func sharedOptionsHint(group: String?, owner: String?) -> String {
    (group.map { "--group \($0) " } ?? "") + (owner.map { "--from \($0) " } ?? "")
}

/// The keychain that `--group`/`--from` name for `service` (both nil: the caller's own).
func openKeychain(
    _ service: some KeyNameConvertible, accessibility: Accessibility? = nil, timeout: Duration? = nil,
    group: String?, owner: String?, groupWritable: Bool = false
) throws(KeychainError) -> Keychain {
    try Keychain(service: service, accessibility: accessibility, timeout: timeout,
                 accessGroup: group, owner: owner, groupWritable: groupWritable)
}
