import ArgumentParser
import KernelKeychain
import Keyrings
import KCIntegrations

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Accessibility.Level: ExpressibleByArgument {}

extension KC {
    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store a value read from standard input.",
            discussion: """
            The value is every byte of standard input, exactly (binary-safe; a trailing
            newline is kept). When standard input is a terminal, kc prompts twice without
            echo instead. Values are never taken from the command line, where other users
            could see them in the process list.

              printf '%s' "$TOKEN" | kc set com.example token
              kc set --access always --timeout 8h com.example session < cookie.bin
              kc set --group deploy --access after-first-unlock com.example token < token.txt

            A new value for an existing item keeps what the item is: its level, its
            device-only flag and its deadline, as a save through 'kc mount' does. Only
            an option given changes one: --access (and --this-device-only) the level,
            --timeout the deadline (--timeout none: no deadline any more). A new item
            is when-unlocked, with no deadline, unless the options say otherwise.

            --generate stores a random value instead of reading one: LENGTH letters and
            digits (32 when no length is given; --symbols adds punctuation) from the
            kernel's random generator. Nothing is printed unless --print is given.

              kc set --generate com.example db-password
              kc set --generate=20 --symbols --print com.example api-key

            With --group GROUP the service is shared with that Unix group (see 'kc share');
            with --from USER (or --group) and a service another user shares with you
            group-writable, an existing item's value is replaced in place.
            """
        )

        @OptionGroup var item: ItemArguments

        // `kc set SERVICE ITEM VALUE`: caught to say where values come from.
        @Argument(help: .hidden)
        var valueArguments: [String] = []

        @OptionGroup var shared: SharedServiceOptions

        // A bare --generate is given its default length before parsing (see
        // ``GeneratedValue/spelledOut(_:)``), so it reads as --generate=32.
        @Option(name: .customLong("generate"), help: ArgumentHelp(
            "Store a random value of this many letters and digits instead of reading one (--generate alone: \(GeneratedValue.defaultLength)).",
            valueName: "length"))
        var generatedLength: Int?

        @Flag(help: "With --generate: use punctuation too, not only letters and digits.")
        var symbols = false

        @Flag(name: .customLong("print"), help: "With --generate: print the value stored, as 'kc get' would.")
        var printsValue = false

        @Flag(help: "With --group, when this write first shares the service: let the group change and remove its items too.")
        var groupWritable = false

        @Option(name: .customLong("access"), help: ArgumentHelp(
            "When the item can be read: when-unlocked (session keyring), after-first-unlock (user keyring), always (persistent keyring). Default: an existing item's level, else when-unlocked.",
            valueName: "level"))
        var level: Accessibility.Level?

        @Flag(help: "Mark the item as device-only: 'kc export' never writes it out, and the vault binds it to this machine. Without it (and without --access) an existing item keeps its flag.")
        var thisDeviceOnly = false

        @Flag(help: "Keep the item in the kernel only, even with a vault: it is gone at reboot (and a saved copy is removed).")
        var ephemeral = false

        // Unconditional: `--timeout -5` is a bad duration, not a missing one followed
        // by an option named -5. Checked in validate(), which words the refusal.
        @Option(name: .customLong("timeout"), parsing: .unconditional, help: ArgumentHelp(
            "Let the kernel expire the item after this long: 90s, 15m, 2h, 7d, 1w, or a run such as 1h30m; 'none' removes an existing item's deadline. Without it an existing item keeps its deadline (or none).",
            valueName: "duration"))
        var timeoutText: String?

        /// --timeout, checked by validate().
        var timeout: TimeoutChoice? { timeoutText.flatMap(TimeoutChoice.init) }

        func validate() throws {
            // A misspelt option followed by its value leaves one name too many: the
            // option, not a value in argv, is what the user got wrong.
            if !valueArguments.isEmpty, let unknown = Suggestion.unknownOption(in: Array(CommandLine.arguments.dropFirst(2)), of: Self.self) {
                let near = Suggestion.nearest(unknown, among: Suggestion.longOptions(of: Self.self))
                throw ValidationError("unknown option '\(unknown)'" + (near.map { " (did you mean '\($0)'?)" } ?? ""))
            }
            if !valueArguments.isEmpty {
                throw ValidationError("values come from standard input, never from arguments (other users see those in ps, and your shell keeps them in its history); nothing was stored. Pipe the value: printf '%s' \"$VALUE\" | kc set \(item.service) \(item.key), or run kc set \(item.service) \(item.key) and type it at the prompt")
            }
            if let generatedLength, !GeneratedValue.lengths.contains(generatedLength) {
                throw ValidationError("--generate takes a length from \(GeneratedValue.lengths.lowerBound) to \(GeneratedValue.lengths.upperBound), not \(generatedLength)")
            }
            if generatedLength == nil && (symbols || printsValue) {
                throw ValidationError("\(symbols ? "--symbols" : "--print") goes with --generate (to print a stored value, use kc get)")
            }
            if let timeoutText, TimeoutChoice(timeoutText) == nil { throw ValidationError(TimeoutChoice.refusal(timeoutText)) }
            try item.validate()
            if groupWritable && shared.group == nil {
                throw ValidationError("--group-writable needs --group GROUP")
            }
        }

        func run() throws {
            try StoreRequest(service: item.serviceName, key: item.keyName, level: level, thisDeviceOnly: thisDeviceOnly,
                             ephemeral: ephemeral, timeout: timeout, group: shared.group, owner: shared.owner,
                             groupWritable: groupWritable,
                             generated: generatedLength.map { GeneratedValue(length: $0, symbols: symbols) },
                             printsValue: printsValue).run()
        }
    }
}

/// `kc set --timeout`: a duration, or `none` to take an existing item's deadline away.
enum TimeoutChoice: Equatable {
    case after(Duration)
    case none

    /// Why `text` is no `--timeout`, for both paths (``FastPath`` leaves a bad one to
    /// the parser, whose validate() says this).
    static func refusal(_ text: String) -> String {
        "--timeout must be a positive duration such as 90s, 15m, 2h, 7d or 1h30m (at most 136 years), or 'none'; not '\(text)'"
    }

    init?(_ text: String) {
        if text == "none" {
            self = .none
        } else if let duration = parseTimeout(text) {
            self = .after(duration)
        } else {
            return nil
        }
    }
}

/// What `kc set` does once its arguments are read, by the parser or by ``FastPath``.
struct StoreRequest {
    var service: KeyName
    var key: KeyName
    /// The level given with --access; nil keeps an existing item's.
    var level: Accessibility.Level?
    /// --this-device-only: without --access, at an existing item's level.
    var thisDeviceOnly = false
    var ephemeral = false
    /// --timeout; nil keeps an existing item's deadline.
    var timeout: TimeoutChoice?
    var group: String?
    var owner: String?
    var groupWritable = false
    /// --generate: a random value instead of standard input.
    var generated: GeneratedValue? = nil
    /// --print: the value stored goes to standard output.
    var printsValue = false

    func run() throws {
        // Group and owner are checked before the value is asked for.
        var duration: Duration? = nil
        if case .after(let given) = timeout { duration = given }
        var keychain = try openKeychain(service, accessibility: level.map { Accessibility(level: $0, thisDeviceOnly: thisDeviceOnly) },
                                        timeout: duration, group: group, owner: owner, groupWritable: groupWritable).ephemeral(ephemeral)
        if level == nil && thisDeviceOnly { keychain = keychain.thisDeviceOnly() }
        var value = try generated?.make() ?? readValue()
        defer { value.overwriteWithZeros() }
        // --print shows the value before it is stored: one that could not be shown
        // (a closed output, a reader gone) is never the item's value.
        if printsValue { try printGenerated(value) }
        if timeout == TimeoutChoice.none {
            try keychain.set(value, forKey: key, until: nil)
        } else {
            try keychain.set(value, forKey: key)
        }
        if level == .always && !ephemeral, let vault = try? Vault.atDefaultLocation(), vault.exists, !HostKey.exists {
            standardError("kc: note: without a host key (sudo kc vault host-init) always items come back after a reboot at your first 'kc unlock', not at boot")
        }
        let service = self.service, key = self.key
        let ownShared = { (try? Keychain(service: service).sharing()) != nil }
        let storedWhenUnlocked = { (try? keychain.item(key))?.accessibility?.level == .whenUnlocked }
        if keychain.accessGroup != nil && storedWhenUnlocked() && ownShared() {
            standardError("kc: note: '\(service)' is shared from this login session's keyring (when-unlocked): the group loses it when the session ends; store it with --access after-first-unlock to keep it until reboot")
        }
    }

    /// Writes a generated value as `kc get` would (a newline after it at a terminal).
    private func printGenerated(_ value: [UInt8]) throws {
        var written = value.withUnsafeBytes { writeAll(fd: 1, $0) }
        if written && isatty(1) == 1 { written = withUnsafeBytes(of: UInt8(ascii: "\n")) { writeAll(fd: 1, $0) } }
        guard written else {
            standardError("kc: cannot write to standard output: \(String(cString: strerror(errno))); nothing was stored")
            throw ExitStatus.failure
        }
    }

    private func readValue() throws -> [UInt8] {
        if standardInputIsTerminal {
            return try askAtTerminal(prompt: "Value for \(service)/\(key): ", confirm: true,
                                     missing: "no value entered; type it at the prompt or pipe it on standard input",
                                     mismatch: "the two entries differ; nothing was stored, try again")
        }
        guard let value = try readItemValue(what: "the value") else {
            standardError("kc: cannot read standard input; pipe the value in, e.g. printf '%s' \"$V\" | kc set SERVICE KEY")
            throw ExitStatus.failure
        }
        return value
    }
}

/// SERVICE KEY, checked before anything touches the kernel.
struct ItemArguments: ParsableArguments {
    @Argument(help: "The service, e.g. com.example.app (1-255 bytes, no '/').", completion: .custom(storedServiceNames))
    var service: String

    @Argument(help: "The item's name within the service (1-255 bytes, no '/').", completion: .custom(storedItemNames))
    var key: String

    /// The service's name byte for byte (see ``RawArguments``).
    var serviceName: KeyName {
        get throws { try RawArguments.exactNames([service, key])[0] }
    }

    /// The item's name byte for byte.
    var keyName: KeyName {
        get throws { try RawArguments.exactNames([service, key])[1] }
    }

    func validate() throws {
        try validateArgument(serviceName, as: .service)
        try validateArgument(keyName, as: .item)
    }
}
