import KernelKeychain

/// podman's `shell` secret driver backed by the keychain (`kc podman-driver`): podman
/// runs a command per action with the secret's id in `$SECRET_ID` (the value on
/// standard input for store, on standard output for lookup). Secrets are items of one
/// service, by default ``defaultService`` at ``defaultLevel``.
public enum PodmanSecretDriver {
    /// What podman asks the driver to do.
    public enum Action: String, CaseIterable, Sendable {
        case list, lookup, store, delete
    }

    /// The service that holds podman's secrets unless `--service` names another.
    public static let defaultService = "podman"
    /// The level of stored secrets unless `--access` names another: they vanish at
    /// reboot, as podman's own secrets in a tmpfs would not, but no sooner.
    public static let defaultLevel = Accessibility.Level.afterFirstUnlock

    /// The secret podman asks about, from the value of `$SECRET_ID`: nil when it is unset
    /// or empty (podman always sets it); an id that is not a valid item name is an
    /// ``KeychainError/invalidName(kind:problem:)`` error.
    public static func secretID(fromEnvironment value: String?) throws(KeychainError) -> String? {
        guard let value, !value.isEmpty else { return nil }
        try validateName(value, as: .item)
        return value
    }

    /// The command podman runs for an action, before the action's name: `executable`
    /// (kc's absolute path) quoted for /bin/sh, `podman-driver`, and the options that
    /// differ from the defaults.
    public static func driverCommand(executable: String, service: String, level: Accessibility.Level) -> String {
        var command = shellQuoted(executable) + " podman-driver"
        if service != defaultService { command += " --service " + shellQuoted(service) }
        if level != defaultLevel { command += " --access \(level.rawValue)" }
        return command
    }

    /// `--driver-opts` for `podman secret create --driver shell`:
    /// `list=COMMAND list,lookup=COMMAND lookup,store=COMMAND store,delete=COMMAND delete`.
    public static func driverOptions(command: String) -> String {
        Action.allCases.map { "\($0.rawValue)=\(command) \($0.rawValue)" }.joined(separator: ",")
    }

    /// A containers.conf snippet (for ~/.config/containers/containers.conf.d/kc.conf or
    /// /etc/containers/...) that makes the driver podman's default, each command a TOML
    /// basic string.
    public static func containersConfiguration(command: String) -> String {
        let options = Action.allCases.map { action in
            "\(action.rawValue) = \"\(command.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "\\\"")) \(action.rawValue)\""
        }
        return (["[secrets]", "driver = \"shell\"", "", "[secrets.opts]"] + options).joined(separator: "\n")
    }

    /// `text` as one word for /bin/sh: in single quotes, each ' written as '\''.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingAll("'", with: "'\\''") + "'"
    }
}

extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
