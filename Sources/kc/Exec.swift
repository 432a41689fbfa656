import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    struct Exec: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a command with a service's items as environment variables or files.",
            discussion: """
            --env exports each item as an environment variable: the name upper-cased,
            every other character not a letter or digit turned into '_' (token -> TOKEN,
            db.password -> DB_PASSWORD); two items that map to one name are an error.
            --files writes the items, read-only, into a private directory (mode 0500,
            files 0400, in memory: $XDG_RUNTIME_DIR or /dev/shm) named by
            $CREDENTIALS_DIRECTORY, as systemd does; it is removed when the command
            exits, however it exits, and a directory left by a killed kc is removed by
            the next 'kc exec'. Signals sent to kc are passed to the command, and kc
            exits with the command's status. Secrets never appear in kc's own argv or
            environment. Values, the command's arguments and the environment kc
            inherits reach the command as exact bytes, UTF-8 or not.

              kc exec --service com.example.db --env -- psql
              kc exec --service deploy --files -- sh -c 'cat "$CREDENTIALS_DIRECTORY/token"'

            --var NAME sets only $NAME, from the item --env would turn into NAME;
            --var NAME=ITEM sets $NAME from the item ITEM (repeatable; with --env, in
            addition to every item's variable).

              kc exec --service com.github --var GH_TOKEN=token -- gh repo list

            With --group or --from, the services are ones other users share with you,
            and only --var and --files pass their items: --env would let the sharer pick
            the variables, and some variables make programs load or run code.

              kc exec --from alice --service com.example.deploy --var DEPLOY_TOKEN=token -- ./deploy.sh

            kc refuses to set a variable that makes programs load, run or trust other
            code or files (an item 'ld.preload' would preload a library into the
            command), whether --env or --var names it. For your own services,
            --allow-env NAME passes one such variable (repeatable); never for a service
            another user shares. The refused names ('*' ends a prefix; compared in
            upper case):
            \(DangerousVariables.patterns.joined(separator: " "))
            """
        )

        @Option(name: .customLong("service"), help: "A service whose items to pass (repeatable).", completion: .custom(storedServiceNames))
        var services: [String] = []

        @OptionGroup var shared: SharedServiceOptions

        @Flag(help: "Pass the items as environment variables.")
        var env = false

        @Flag(help: "Pass the items as files in $CREDENTIALS_DIRECTORY.")
        var files = false

        @Option(name: .customLong("var"), help: ArgumentHelp(
            "Set only this variable: NAME from the item --env would name so, or NAME=ITEM from ITEM (repeatable).",
            valueName: "name[=item]"))
        var namedVariables: [String] = []

        @Option(name: .customLong("allow-env"), help: ArgumentHelp(
            "Let an item of your own service set this variable although it can make programs run other code (repeatable; see below).",
            valueName: "name"))
        var allowedVariables: [String] = []

        @Argument(parsing: .captureForPassthrough, help: "The command and its arguments, after --.")
        var command: [String] = []

        func validate() throws {
            // The passthrough argument takes a `--help` that comes before `--` too.
            if command.first == "--help" || command.first == "-h" { throw CleanExit.helpRequest(self) }
            guard !services.isEmpty else { throw ValidationError("name at least one --service") }
            for service in try RawArguments.exactNames(services, ignoringLast: command.count) { try validateArgument(service, as: .service) }
            guard env || files || !namedVariables.isEmpty else { throw ValidationError("choose --env, --var, --files, or some of them") }
            for text in namedVariables where Self.namedVariable(text) == nil {
                throw ValidationError("--var takes NAME or NAME=ITEM, a NAME of letters, digits and '_' not starting with a digit; not '\(text)'")
            }
            if env && (shared.group != nil || shared.owner != nil) {
                throw ValidationError(EnvironmentNames.Refusal.sharedNeedsNamesMessage)
            }
            if let allowed = allowedVariables.first {
                guard env || !namedVariables.isEmpty else { throw ValidationError("--allow-env applies to --env and --var") }
                guard shared.group == nil && shared.owner == nil else {
                    throw ValidationError("--allow-env is only for your own services: a service another user shares with you may not set $\(allowed); drop --allow-env, or use --files")
                }
            }
            if command.first == "--" { return }
            guard !command.isEmpty else { throw ValidationError("give the command to run after --") }
        }

        func run() throws {
            // Bytes, not the parsed Strings: an argument that is not UTF-8 reaches the
            // command as the caller wrote it.
            let parsed = rawTrailingArguments(matching: command)
            let argv = command.first == "--" ? Array(parsed.dropFirst()) : parsed
            let variables = try RawArguments.exactNames(namedVariables, ignoringLast: command.count).compactMap(EnvironmentNames.NamedVariable.init)
            try ExecRequest(services: RawArguments.exactNames(services, ignoringLast: command.count), group: shared.group, owner: shared.owner,
                            env: env, namedVariables: variables, files: files, allowedVariables: allowedVariables, argv: argv).run()
        }

        static func namedVariable(_ text: String) -> EnvironmentNames.NamedVariable? {
            EnvironmentNames.NamedVariable(KeyName(text))
        }
    }
}

/// What `kc exec` does once its arguments are read, by the parser or by ``FastPath``.
struct ExecRequest {
    var services: [KeyName]
    var group: String?
    var owner: String?
    var env: Bool
    var namedVariables: [EnvironmentNames.NamedVariable] = []
    var files: Bool
    var allowedVariables: [String]
    var argv: [[UInt8]]

    /// The services in the order given, each once: a service named twice (`--service S
    /// --service S`) is passed once, or its items would clash with themselves. Compared
    /// byte for byte, as the kernel compares names.
    var distinctServices: [KeyName] {
        var seen: Swift.Set<KeyName> = []
        return services.filter { seen.insert($0).inserted }
    }

    func run() throws {
        guard !argv.isEmpty else {
            standardError("kc: give the command to run after --; see 'kc exec --help'")
            throw ExitStatus.usage
        }
        var secrets = try collectItems()
        defer { for index in secrets.indices { secrets[index].value.overwriteWithZeros() } }

        var environment = ChildEnvironment.inherited()
        defer { environment.overwriteWithZeros() }
        if env || !namedVariables.isEmpty {
            // By index: a copy of an item would share its value's buffer, and zeroing
            // a shared array copies it first, leaving the value in the original.
            let variables: [(name: String, index: Int)]
            do {
                EnvironmentNames.Refusal.listing = owner.map { "kc ls --from \($0)" } ?? group.map { "kc ls --group \($0)" } ?? "kc ls"
                variables = try EnvironmentNames.variables(for: secrets, of: distinctServices, every: env, named: namedVariables, allowing: allowedVariables,
                                                           sharedByAnotherUser: group != nil || owner != nil,
                                                           writableByMembers: serviceMembersMayWrite())
            } catch {
                standardError("kc: \(error.message)")
                if case .noItem = error { throw ExitStatus.notFound }
                throw ExitStatus.failure
            }
            for (name, index) in variables { environment.set(name, to: secrets[index].value) }
        }
        var directory: CredentialsDirectory? = nil
        if files {
            let created: CredentialsDirectory
            do {
                created = try CredentialsDirectory.create(with: secrets)
            } catch {
                standardError("kc: \(error.message)")
                throw ExitStatus.failure
            }
            directory = created
            environment.set("CREDENTIALS_DIRECTORY", to: created.path.utf8)
        }
        // The environment and the files hold what the command needs: kc keeps no
        // copy while it waits (runSupervised zeroes the environment once spawned).
        for index in secrets.indices { secrets[index].value.overwriteWithZeros() }
        let status = runSupervised(argv, environment: &environment)
        directory?.remove()
        switch status {
        case .exited(let code):
            throw ExitCode(code)
        case .signalled(let signal):
            // Die of the same signal, so the caller sees what the command did.
            Glibc.signal(signal, SIG_DFL)
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, signal)
            sigprocmask(SIG_UNBLOCK, &unblocked, nil)
            kill(getpid(), signal)
            throw ExitCode(128 + signal)
        case .failedToStart(let error):
            standardError("kc: cannot run '\(String(decoding: argv[0], as: UTF8.self))': \(String(cString: strerror(error)))")
            throw ExitCode(127)
        }
    }

    /// The first of the caller's own services that members of a group-writable share
    /// may write, whose values others choose; nil for a service another user shares
    /// (refused on its own terms) or none.
    private func serviceMembersMayWrite() -> (service: KeyName, group: String)? {
        guard group == nil && owner == nil else { return nil }
        for service in distinctServices {
            if let sharing = (try? Keychain(service: service).sharing()) ?? nil, sharing.isGroupWritable {
                return (service, sharing.group.name)
            }
        }
        return nil
    }

    private func collectItems() throws -> [PassedItem] {
        var items: [PassedItem] = []
        for service in distinctServices {
            let keychain = try openKeychain(service, group: group, owner: owner)
            let names = try keychain.allKeyNames()
            // Another user's service that is not shared already failed in allKeys().
            let exists = try group != nil || owner != nil || keychain.serviceExists()
            if names.isEmpty && !exists {
                standardError("kc: no service '\(service)'; list the services with 'kc ls'")
                throw ExitStatus.notFound
            }
            if group == nil && owner == nil {
                // One's own service is read as one set: a mirror that replaces it whole
                // (kc agent) is never handed over half old, half new.
                for (name, value) in try keychain.allValues() {
                    items.append(PassedItem(service: service, name: name, value: value))
                }
                continue
            }
            for name in names {
                // An item can expire between the listing and the read: skip it.
                guard let value = try keychain.data(forKey: name) else { continue }
                items.append(PassedItem(service: service, name: name, value: value))
            }
        }
        return items
    }
}

/// The arguments that follow kc's own in its raw argv, byte for byte: the last
/// `parsed.count` of `CommandLine.unsafeArgv`. ArgumentParser hands the command over as
/// `String`s, in which bytes that are not UTF-8 became U+FFFD; these are what the caller
/// passed.
///
/// `parsed` is what ArgumentParser captured for them. Captured arguments are a verbatim
/// suffix of argv, so each matches its raw bytes, decoded; if they ever did not, the
/// parsed text is used rather than a guess at which raw argument was meant.
func rawTrailingArguments(matching parsed: [String]) -> [[UInt8]] {
    let fallback = parsed.map { Array($0.utf8) }
    let argc = Int(CommandLine.argc)
    guard parsed.count < argc else { return fallback }
    var raw: [[UInt8]] = []
    for index in (argc - parsed.count)..<argc {
        guard let argument = CommandLine.unsafeArgv[index] else { return fallback }
        raw.append(cStringBytes(argument))
    }
    for (bytes, text) in zip(raw, parsed) where !String(decoding: bytes, as: UTF8.self).utf8.elementsEqual(text.utf8) {
        return fallback
    }
    return raw
}
