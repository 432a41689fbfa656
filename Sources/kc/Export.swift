import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// `--format` of export and import.
enum ArchiveFormat: String, ExpressibleByArgument, CaseIterable {
    case json, env
}

extension KC {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write items out for a backup: JSON (all or some services) or dotenv (one service).",
            discussion: """
            Kernel keys do not survive a reboot; keep an encrypted copy:

              kc export | age -p > kc.age          # later: age -d kc.age | kc import

            JSON (stable, version 1): {"format": "kc-export", "version": 1, "items":
            [{"service", "name", "access", "secondsLeft" and "expiresAt" (null for none), "value"
            (base64 of the exact bytes)}]}. dotenv: NAME='value' lines of one service,
            quoted so that python-dotenv, docker compose's env_file and systemd's
            EnvironmentFile= read back the exact value; a value none of them can carry
            (a carriage return, '${NAME}', or '$' with a quote) is refused by name.
            Device-only items are never exported.
            kc refuses to write secrets to a terminal.
            """
        )

        @Option(name: .customLong("service"), help: "Export only this service (repeatable); default all.", completion: .custom(storedServiceNames))
        var services: [String] = []

        @Option(help: "json (default) or env (one service).")
        var format: ArchiveFormat = .json

        func validate() throws {
            for service in try RawArguments.exactNames(services) { try validateArgument(service, as: .service) }
            if format == .env && services.count != 1 {
                throw ValidationError("--format env needs exactly one --service")
            }
        }

        func run() throws {
            guard isatty(1) == 0 else {
                standardError("kc: refusing to write secrets to a terminal; redirect or pipe it: kc export | age -p > kc.age")
                throw ExitStatus.failure
            }
            let names = try RawArguments.exactNames(services)
            var (items, skipped) = try Keychain.export(services: names)
            defer { for index in items.indices { items[index].value.overwriteWithZeros() } }
            var output: [UInt8]
            switch format {
            case .json:
                output = KeychainArchive.encodeJSON(items)
            case .env:
                do {
                    output = Array(try DotEnv.render(items.map { ($0.name.description, $0.value) }).utf8)
                } catch {
                    standardError("kc: cannot export as dotenv: \(error)")
                    throw ExitStatus.failure
                }
            }
            defer { output.overwriteWithZeros() }
            guard output.withUnsafeBytes({ writeAll(fd: 1, $0) }) else {
                standardError("kc: cannot write to standard output")
                throw ExitStatus.failure
            }
            if skipped > 0 { standardError("kc: left out \(skipped) device-only item(s), as device-only items are never exported") }
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore items from 'kc export' output (JSON or dotenv) on standard input.",
            discussion: """
            The whole input is checked before anything is written: a malformed file is
            rejected with the JSON path or line of the fault, and nothing is imported;
            so is one that names an item (service and name, byte for byte) twice.
            Levels and time left are restored. An existing item is replaced only with
            --overwrite; otherwise it is kept and reported. --dry-run lists what would
            happen (add, replace, keep) and changes nothing.

              age -d kc.age | kc import
              kc import --format env --service com.example.app < .env
            """
        )

        /// The most input an import reads.
        static let inputLimit = 64 << 20

        @Option(help: "With JSON, import only this service; with dotenv, the service to import into.")
        var service: String?

        @Option(help: "json (default) or env.")
        var format: ArchiveFormat = .json

        @Option(name: .customLong("access"), help: ArgumentHelp("Level for dotenv items (JSON carries its own).", valueName: "level"))
        var level: Accessibility.Level = .whenUnlocked

        @Flag(help: "Replace items that already exist.")
        var overwrite = false

        @Flag(help: "Show what would change; change nothing.")
        var dryRun = false

        func validate() throws {
            if let service { try validateArgument(RawArguments.exactNames([service])[0], as: .service) }
            if format == .env && service == nil { throw ValidationError("--format env needs --service, the service to import into") }
        }

        func run() throws {
            // At most one byte over the limit is read: more is refused, not held.
            guard var input = readStandardInput(limit: Self.inputLimit) else {
                standardError("kc: cannot read standard input")
                throw ExitStatus.failure
            }
            defer { input.overwriteWithZeros() }
            guard input.count <= Self.inputLimit else {
                standardError("kc: nothing imported: the input is larger than 64 MiB (\(Self.inputLimit) bytes), the most kc import reads; is it the right file?")
                throw ExitStatus.failure
            }
            var items: [ExportedItem]
            do {
                items = try parse(input)
            } catch {
                standardError("kc: nothing imported: \(error)")
                throw ExitStatus.failure
            }
            defer { for index in items.indices { items[index].value.overwriteWithZeros() } }
            if dryRun {
                let steps = try Keychain.planImport(items, overwrite: overwrite)
                // Names escaped as in `kc ls --long`: none can split a column or a line.
                for step in steps {
                    print("\(step.action.rawValue)\t\(ReadAudit.escaped(step.item.service.bytes, keepingSpaces: true))/\(ReadAudit.escaped(step.item.name.bytes, keepingSpaces: true))")
                }
                return
            }
            let steps = try Keychain.importItems(items, overwrite: overwrite)
            let added = steps.filter { $0.action == .add }.count
            let replaced = steps.filter { $0.action == .replace }.count
            let kept = steps.filter { $0.action == .keep }
            for step in kept { standardError("kc: kept existing \(step.item.service)/\(step.item.name); --overwrite replaces it") }
            standardError("kc: imported \(added + replaced) item(s): \(added) added, \(replaced) replaced, \(kept.count) kept")
        }

        /// `--service` byte for byte (see ``RawArguments``).
        private var serviceName: KeyName? {
            get throws(ArchiveError) {
                guard let service else { return nil }
                do { return try RawArguments.exactNames([service])[0] } catch {
                    throw ArchiveError(location: "--service", problem: "\(error)")
                }
            }
        }

        private func parse(_ input: [UInt8]) throws(ArchiveError) -> [ExportedItem] {
            switch format {
            case .json:
                let items = try KeychainArchive.decodeJSON(input)
                guard let service = try serviceName else { return items }
                // Byte for byte, as the kernel compares names (String's == would take
                // the NFD spelling of a service for its NFC one).
                return items.filter { $0.service == service }
            case .env:
                guard let text = String(validating: input, as: UTF8.self) else {
                    throw ArchiveError(location: "(input)", problem: "is not UTF-8 text")
                }
                let service = try serviceName ?? ""
                return try DotEnv.parse(text).map {
                    ExportedItem(service: service, name: KeyName($0.name), level: level, secondsLeft: nil, value: $0.value)
                }
            }
        }
    }
}
