import ArgumentParser
import KernelKeychain
import Keyrings
import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The commands scripts call in a loop, in their plain spellings, run without
/// ArgumentParser: `get`, `set`, `rm`, `ls`, `exec` and `podman-driver lookup`.
///
/// Parsing with ArgumentParser reflects over the command types, and the Swift runtime's
/// first conformance look-ups scan every conformance record in this static binary:
/// about 2.5 ms, three times what the rest of such a command costs
/// (docs/BENCHMARKS.md). So `main()` first reads argv as ``PlainCommandLine``; each
/// spelling here calls the function the parsed command's `run()` calls, after the same
/// checks its `validate()` makes. A spelling not recognised, or a value whose error
/// message belongs to the parser (an unknown level, a bad duration), is left to the
/// parser: help, completions and usage errors stay ArgumentParser's.
enum FastPath {
    private static let quiet: [StaticString] = ["-q", "--quiet"]
    private static let group: [StaticString] = ["--group"]
    private static let owner: [StaticString] = ["--from"]
    private static let access: [StaticString] = ["--access"]
    private static let timeout: [StaticString] = ["--timeout"]
    private static let thisDeviceOnly: [StaticString] = ["--this-device-only"]
    private static let ephemeral: [StaticString] = ["--ephemeral"]
    private static let groupWritable: [StaticString] = ["--group-writable"]
    private static let service: [StaticString] = ["--service"]
    private static let env: [StaticString] = ["--env"]
    private static let files: [StaticString] = ["--files"]
    private static let allowEnv: [StaticString] = ["--allow-env"]

    /// Runs the command line and exits if it is a plain spelling; returns otherwise.
    static func runIfPlain() {
        if PlainCommandLine.argument(1, is: "get") { get() }
        else if PlainCommandLine.argument(1, is: "set") { set() }
        else if PlainCommandLine.argument(1, is: "rm") { remove() }
        else if PlainCommandLine.argument(1, is: "ls") { list() }
        else if PlainCommandLine.argument(1, is: "exec") { exec() }
        else if PlainCommandLine.argument(1, is: "podman-driver") && PlainCommandLine.argument(2, is: "lookup") { podmanDriverLookup() }
    }

    /// `--group G` or `--from U` (not both: which wins is the parser's to say).
    private static func sharing(_ line: PlainCommandLine) -> (group: String?, owner: String?)? {
        let shared = (group: line.value(group), owner: line.value(owner))
        return shared.group != nil && shared.owner != nil ? nil : shared
    }

    private static func get() {
        guard let line = PlainCommandLine(from: 2, .init(flags: [quiet], options: [group, owner], names: 2...2)),
              let shared = sharing(line) else { return }
        finish {
            let service = KeyName(cString: line.names[0]), key = KeyName(cString: line.names[1])
            try validateName(service, as: .service)
            try validateName(key, as: .item)
            let keychain = try openKeychain(service, group: shared.group, owner: shared.owner)
            try printValue(keychain: keychain, key: key, options: sharedOptionsHint(group: shared.group, owner: shared.owner),
                           quiet: line.has(quiet))
        }
    }

    private static func set() {
        guard let line = PlainCommandLine(from: 2, .init(flags: [thisDeviceOnly, ephemeral, groupWritable],
                                                         options: [access, timeout, group, owner], names: 2...2)),
              let shared = sharing(line), shared.group != nil || !line.has(groupWritable) else { return }
        var level: Accessibility.Level? = nil
        if let text = line.value(access) {
            guard let given = Accessibility.Level(rawValue: text) else { return }
            level = given
        }
        var duration: TimeoutChoice? = nil
        if let text = line.value(timeout) {
            guard let given = TimeoutChoice(text) else { return }
            duration = given
        }
        finish {
            let service = KeyName(cString: line.names[0]), key = KeyName(cString: line.names[1])
            try validateName(service, as: .service)
            try validateName(key, as: .item)
            try StoreRequest(service: service, key: key, level: level, thisDeviceOnly: line.has(thisDeviceOnly),
                             ephemeral: line.has(ephemeral), timeout: duration, group: shared.group, owner: shared.owner,
                             groupWritable: line.has(groupWritable)).run()
        }
    }

    private static func remove() {
        guard let line = PlainCommandLine(from: 2, .init(options: [group, owner], names: 2...2)),
              let shared = sharing(line) else { return }
        finish {
            let service = KeyName(cString: line.names[0]), key = KeyName(cString: line.names[1])
            try validateName(service, as: .service)
            try validateName(key, as: .item)
            try removeItem(service: service, key: key, group: shared.group, owner: shared.owner)
        }
    }

    private static func list() {
        guard let line = PlainCommandLine(from: 2, .init(options: [group, owner], names: 0...1)),
              let shared = sharing(line) else { return }
        guard let name = line.names.first else {
            // Without a service the parser ignores --group/--from; leave that to it.
            guard shared.group == nil && shared.owner == nil else { return }
            finish { try listServiceNames() }
        }
        finish {
            let service = KeyName(cString: name)
            try validateName(service, as: .service)
            try listItemNames(service: service, group: shared.group, owner: shared.owner)
        }
    }

    private static func exec() {
        guard let line = PlainCommandLine(from: 2, .init(flags: [env, files], options: [service, group, owner, allowEnv],
                                                         repeatable: ["--service", "--allow-env"], names: 0...0, command: true)),
              let shared = sharing(line) else { return }
        let services = line.values(service).map { KeyName(cString: $0) }
        let allowed = line.values(allowEnv).map { String(cString: $0) }
        // Exec.validate()'s checks; each failure is the parser's to word.
        // --var is the parser's; so is --env with a service another user shares (refused).
        let own = shared.group == nil && shared.owner == nil
        guard !services.isEmpty, line.has(env) || line.has(files), own || !line.has(env),
              allowed.isEmpty || (line.has(env) && own),
              services.allSatisfy({ (try? validateName($0, as: .service)) != nil }) else { return }
        finish {
            try ExecRequest(services: services, group: shared.group, owner: shared.owner, env: line.has(env),
                            files: line.has(files), allowedVariables: allowed, argv: line.command.map(cStringBytes)).run()
        }
    }

    private static func podmanDriverLookup() {
        guard let line = PlainCommandLine(from: 3, .init(options: [service, access], names: 0...0)) else { return }
        var level = Accessibility.Level.afterFirstUnlock
        if let text = line.value(access) {
            guard let given = Accessibility.Level(rawValue: text) else { return }
            level = given
        }
        let name = line.value(service) ?? "podman"
        finish {
            try validateName(name, as: .service)
            try podmanLookup(in: podmanKeychain(service: name, level: level), service: name)
        }
    }

    /// Runs the command and exits with its status, as `main()` does for a parsed one:
    /// a `KeychainError` the command let through is reported there.
    private static func finish(_ body: () throws -> Void) -> Never {
        do {
            try body()
            try flushStandardOutput()
            exit(0)
        } catch {
            KC.exit(after: error)
        }
    }
}
