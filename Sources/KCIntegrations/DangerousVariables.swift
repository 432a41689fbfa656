import KeyringCore

/// The environment variables `kc exec` will not set from an item unless the caller
/// allows each by name (`--allow-env NAME`, only for their own services).
///
/// Each makes the command, or a program it starts, load code, run a command, or trust
/// or look up files somewhere else: an item named `ld.preload` in a service someone
/// shares with you would otherwise preload their library into your command. The list
/// is glibc's `UNSECURE_ENVVARS` (sysdeps/generic/unsecvars.h, what the loader removes
/// for setuid programs), sudo's `env_delete` defaults (plugins/sudoers/env.c), and the
/// variables of the same kind that git, interpreters, toolchains, pagers, editors, TLS
/// libraries and cloud tools read. No such list is complete, which is why items of a
/// service another user shares become only variables the caller names (`--var`).
/// A pattern ending in `*` matches every name that starts with the rest.
public enum DangerousVariables {
    /// The core's list (``ExecEnvironment/dangerousPatterns``), as text.
    public static var patterns: [String] {
        ExecEnvironment.dangerousPatterns.map { String(decoding: staticBytes($0), as: UTF8.self) }
    }

    /// Whether `name` (an environment name kc made: upper case, digits and `_`) is one.
    public static func contains(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { ExecEnvironment.isDangerous(UnsafeRawBufferPointer($0)) }
    }
}
