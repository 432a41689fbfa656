import CKeyutils

/// `kc exec --env [--service S]... -- COMMAND [ARG...]` of the caller's own services,
/// served where there is no vault and every item becomes a variable without a word.
///
/// The full kc (Sources/kc/Exec.swift, `ExecRequest.run`) reads each service given, once
/// each in the order given, as one set (`Keychain.allValues`: every keyring of the service
/// at every level, the caller's `user` keys in each, a read of each, and the keyrings
/// found again to be sure no mirror replaced the service meanwhile), names a variable
/// for each item by the core's rule (``ExecEnvironment/variableName(forItem:)``), sets
/// them over the environment it was given, and runs the command found on PATH with the
/// signals it forwards at their default action and the caller's core-file limit, passing
/// the command's end on as its own. The front does the same, except that it becomes the
/// command (execve) where the full kc waits for it: the same program, arguments,
/// environment, descriptors, signal mask and limits, without a process in between.
///
/// Anything the full kc would refuse with a message or settle with a change (a vault, a
/// service that does not exist, a keyring to repair, a share members may write, an item
/// whose name is not UTF-8 or makes a variable kc refuses or another item's variable, a
/// NUL in a value, a key that cannot be read) is handed over before anything changed.
struct PlainExec {
    let services: [UnsafePointer<CChar>]
    let command: [UnsafePointer<CChar>]

    /// The signals the full kc forwards to its command, which the command starts with at
    /// their default action.
    private static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        let env: [StaticString] = ["--env"], service: [StaticString] = ["--service"]
        guard PlainCommandLine.argument(argc: argc, argv: argv, 1, is: "exec"),
              let line = PlainCommandLine(argc: argc, argv: argv, from: 2,
                                          .init(flags: [env], options: [service], repeatable: ["--service"],
                                                names: 0...0, command: true)),
              line.has(env) else { return nil }
        services = line.values(service)
        command = line.command
        guard !services.isEmpty, services.allSatisfy({ NameRules.isValid($0) }) else { return nil }
    }

    /// Becomes the command, with the services' items in its environment; returns, having
    /// changed nothing and keeping no value, where the full kc must decide.
    func serveIfOwnAndPlain(environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        // The read audit is the full kc's; so is a command whose name its message would
        // show otherwise than as these bytes.
        guard getenv("KC_AUDIT") == nil, hasNoVaultOutsideNamespaces(checkingStash: true),
              NameRules.isUTF8(UnsafeRawBufferPointer(start: command[0], count: strlen(command[0]))) else { return }
        var distinct: [UnsafePointer<CChar>] = []
        for service in services where !distinct.contains(where: { strcmp($0, service) == 0 }) { distinct.append(service) }
        let callersLimit = CoreDumps.disable()
        var variables = VariableEntries()
        defer { variables.discard() }
        guard variables.collect(distinct) else {
            CoreDumps.restore(callersLimit)
            return
        }
        var entries = variables.environment(over: environment)
        CoreDumps.restore(callersLimit)
        for signal in Self.forwardedSignals { _ = CKeyutils_default_signal(signal) }
        let error = Self.execute(command, entries.pointers())
        entries.discard()
        variables.discard()
        var line = ByteText()
        line.append("kc: cannot run '")
        line.append(command[0])
        line.append("': ")
        if let reason = strerror(error) { line.append(reason) }
        line.append("\n")
        line.bytes.withUnsafeBytes { _ = StandardStream.write($0, to: 2) }
        exit(127)
    }

    /// execve of `command[0]` found as `posix_spawnp` finds it (the full kc's
    /// `runSupervised`): a name with a `/` as it is; else each folder of PATH in turn
    /// (`/bin:/usr/bin` without one; an empty entry is the current folder), going on past
    /// a folder where it is missing or not allowed, with no shell for a file that is not
    /// a program. Returns the errno of the failure that ends the search.
    private static func execute(_ command: [UnsafePointer<CChar>], _ environment: [UnsafeMutablePointer<CChar>?]) -> Int32 {
        var arguments: [UnsafeMutablePointer<CChar>?] = command.map { UnsafeMutablePointer(mutating: $0) }
        arguments.append(nil)
        return arguments.withUnsafeBufferPointer { argv -> Int32 in
            environment.withUnsafeBufferPointer { envp -> Int32 in
                let program = command[0]
                if strchr(program, Int32(UInt8(ascii: "/"))) != nil {
                    execve(program, argv.baseAddress.unsafelyUnwrapped, envp.baseAddress.unsafelyUnwrapped)
                    return CKeyutils_errno()
                }
                let path = getenv("PATH").map { UnsafePointer($0) } ?? cString("/bin:/usr/bin")
                var deniedSomewhere = false
                var start = path
                while true {
                    var end = start
                    while end[0] != 0 && end[0] != CChar(UInt8(ascii: ":")) { end += 1 }
                    var candidate = ByteText()
                    if end > start {
                        candidate.append(Array(UnsafeRawBufferPointer(start: start, count: end - start)))
                        candidate.append("/")
                    }
                    candidate.append(program)
                    let error = candidate.withCString { file -> Int32 in
                        execve(file, argv.baseAddress.unsafelyUnwrapped, envp.baseAddress.unsafelyUnwrapped)
                        return CKeyutils_errno()
                    }
                    switch error {
                    case EACCES: deniedSomewhere = true
                    case ENOENT, ENOTDIR, ESTALE, ENODEV, ETIMEDOUT: break
                    default: return error
                    }
                    if end[0] == 0 { return deniedSomewhere ? EACCES : error }
                    start = end + 1
                }
            }
        }
    }
}

/// The variables of the services' items, as `NAME=value` entries built once in place
/// (each value is read into a buffer that is zeroed, then copied into an entry made
/// to its size), zeroed when discarded.
private struct VariableEntries {
    private var entries: [[UInt8]] = []
    private var names: [[UInt8]] = []

    /// The items of each service, in the order given and each service's items sorted by
    /// their bytes (`allValues`); false where the full kc would decide otherwise.
    mutating func collect(_ services: [UnsafePointer<CChar>]) -> Bool {
        for service in services {
            guard let rings = Self.ownRings(of: service), !rings.isEmpty else { return false }
            var items: [(name: [UInt8], entry: [UInt8])] = []
            for ring in rings {
                guard let keys = ServiceKeyringProbe.userKeys(of: ring) else { return false }
                for key in keys {
                    guard let entry = Self.entry(for: key.name, of: key.serial) else {
                        for index in items.indices { Self.zero(&items[index].entry) }
                        return false
                    }
                    items.append((key.name, entry))
                }
            }
            // Found again as they were: no mirror replaced the service while it was read.
            guard let again = Self.ownRings(of: service), again == rings else {
                for index in items.indices { Self.zero(&items[index].entry) }
                return false
            }
            items.sort { $0.name.lexicographicallyPrecedes($1.name) }
            for item in items {
                let name = Array(item.entry.prefix { $0 != UInt8(ascii: "=") })
                entries.append(item.entry)
                // Two items of one variable, or two copies of one item: the full kc's to word.
                guard !names.contains(name) else { return false }
                names.append(name)
            }
        }
        return true
    }

    /// The service's keyrings at every level, each the caller's with a mask kc makes,
    /// linked directly in its anchor and not shared with a group that may write; nil
    /// for anything else.
    private static func ownRings(of service: UnsafePointer<CChar>) -> [Int32]? {
        var rings: [Int32] = []
        let certain = ServiceKeyringProbe.probe(service) { ring, linkedDirectly in
            guard linkedDirectly else { return false }
            // `Sharing(info).isGroupWritable`: members may write items or link keys.
            let groupMayWrite = KeyDescribe.read(ring) { fields, _ in (fields.permissions >> 8) & (0x04 | 0x10) != 0 }
            guard groupMayWrite == false else { return false }
            rings.append(ring)
            return true
        }
        return certain ? rings : nil
    }

    /// `NAME=value` for the item: its variable named by the core's rule, not one kc
    /// refuses, its value read whole and free of NUL bytes; nil otherwise.
    private static func entry(for item: [UInt8], of key: Int32) -> [UInt8]? {
        guard let name = item.withUnsafeBytes({ ExecEnvironment.variableName(forItem: $0) }),
              !name.withUnsafeBytes({ ExecEnvironment.isDangerous($0) }) else { return nil }
        return withUnsafeTemporaryAllocation(byteCount: 32768, alignment: 8) { buffer -> [UInt8]? in
            guard let base = buffer.baseAddress else { return nil }
            let length = keyctl_read(key, base.assumingMemoryBound(to: CChar.self), buffer.count)
            defer { if length > 0 { explicit_bzero(base, min(Int(length), buffer.count)) } }
            // One NUL byte may be a key marked empty: the full kc decides (as for any NUL).
            guard length >= 0 && length <= buffer.count else { return nil }
            let value = UnsafeRawBufferPointer(start: base, count: Int(length))
            guard !value.contains(0) else { return nil }
            var entry: [UInt8] = []
            entry.reserveCapacity(name.count + 1 + value.count)
            entry.append(contentsOf: name)
            entry.append(UInt8(ascii: "="))
            entry.append(contentsOf: value)
            return entry
        }
    }

    /// The environment the command gets: the front's own, entry by entry, with each
    /// variable set as `ChildEnvironment.set` sets it (every entry of that name removed,
    /// the variable appended).
    func environment(over inherited: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> ChildEntries {
        var pointers: [UnsafeMutablePointer<CChar>?] = []
        var index = 0
        while let entry = inherited[index] {
            pointers.append(entry)
            index += 1
        }
        var made = ChildEntries()
        for (name, entry) in zip(names, entries) {
            pointers.removeAll { existing in
                guard let existing else { return false }
                var length = 0
                while existing[length] != 0 && existing[length] != CChar(UInt8(ascii: "=")) { length += 1 }
                return length == name.count && memcmp(existing, name, length) == 0
            }
            pointers.append(made.add(entry))
        }
        made.inherited = pointers
        return made
    }

    /// Zeroes every value held.
    mutating func discard() {
        for index in entries.indices { Self.zero(&entries[index]) }
        entries = []
    }

    fileprivate static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
    }
}

/// The command's environment as C strings: the inherited entries and the variables,
/// each variable copied once into memory of its own that is zeroed when discarded.
private struct ChildEntries {
    var inherited: [UnsafeMutablePointer<CChar>?] = []
    private var owned: [(UnsafeMutablePointer<CChar>, Int)] = []

    mutating func add(_ entry: [UInt8]) -> UnsafeMutablePointer<CChar> {
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: entry.count + 1)
        for (index, byte) in entry.enumerated() { copy[index] = CChar(bitPattern: byte) }
        copy[entry.count] = 0
        owned.append((copy, entry.count + 1))
        return copy
    }

    func pointers() -> [UnsafeMutablePointer<CChar>?] {
        var all = inherited
        all.append(nil)
        return all
    }

    mutating func discard() {
        for (copy, count) in owned {
            explicit_bzero(copy, count)
            copy.deallocate()
        }
        owned = []
    }
}
