import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `kc` command: a root that only configures; each subcommand lives in its own file.
/// (Started from main.swift rather than `@main`, whose entry point also sets up the
/// concurrency runtime's main executor: four page faults more for every `kc get`.)
struct KC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kc",
        abstract: "A keychain for Linux, stored in the kernel's keyrings.",
        discussion: """
        Values are read from standard input and written to standard output as exact
        bytes. Exit status: 0 success, 1 not found, 2 any other failure, 64 usage error.
        """,
        version: kcVersion,
        subcommands: [Set.self, Get.self, Remove.self, List.self, Find.self, Share.self, Unshare.self, Mount.self, Umount.self, Exec.self, PodmanDriver.self, CredentialServer.self, Export.self, Import.self, VaultCommand.self, Unlock.self, Lock.self, Doctor.self, AgentCommand.self]
    )

    /// Parse errors become one `kc: ` line and exit 64; help and --version print as usual.
    static func main() {
        // Before anything reads a value, `kc get` included.
        CoreDumps.disable()
        // Installed as git-credential-kc and docker-credential-kc (links to kc), it is
        // that helper: clients call them in loops, so they skip the parser too.
        if let program = CommandLine.unsafeArgv[0] {
            let slash = strrchr(program, Int32(UInt8(ascii: "/")))
            let name = slash.map { $0 + 1 } ?? program
            if strcmp(name, "git-credential-kc") == 0 { GitCredentialCommand.main() }
            if strcmp(name, "docker-credential-kc") == 0 { DockerCredentialCommand.main() }
        }
        // The commands scripts call in a loop, in their plain spellings, skip the
        // parser (see ``FastPath``); it returns for anything else.
        FastPath.runIfPlain()
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.isEmpty { shortUsage() }
        do {
            var command = try parseAsRoot(GeneratedValue.spelledOut(arguments))
            try command.run()
            try flushStandardOutput()
            Glibc.exit(0)
        } catch {
            exit(after: error)
        }
    }

    /// Exits as DESIGN §5 says after a command threw `error`: an ExitCode as it is, a
    /// keychain failure as ``fail(_:)`` reports it (the one place a command's
    /// `KeychainError` is converted, for parsed commands and ``FastPath`` alike), a
    /// parse or validation error as one `kc: ` line and 64; help and --version print.
    static func exit(after error: any Error) -> Never {
        if let exit = error as? ExitCode { Glibc.exit(exit.rawValue) }
        if let output = error as? OutputFailure {
            standardError("kc: " + output.message)
            Glibc.exit(ExitStatus.failure.rawValue)
        }
        if let failure = error as? KeychainError { Glibc.exit(fail(failure).rawValue) }
        let code = exitCode(for: error)
        guard code != .success else { self.exit(withError: error) }
        // A check in validate() that already printed its line throws a bare ExitCode.
        if let message = fullMessage(for: error).split(separator: "\n").first.map(String.init) {
            if let first = CommandLine.arguments.dropFirst().first, !first.hasPrefix("-"), !commandNames.contains(first) {
                let near = Suggestion.nearest(first, among: commandNames.filter { $0.count > 1 })
                standardError("kc: unknown command '\(first)'" + (near.map { " (did you mean '\($0)'?)" } ?? "") + "; see 'kc --help' for the commands")
            } else {
                standardError("kc: \(kcStyle(message)); see \(helpHint)")
            }
        }
        Glibc.exit(code.rawValue)
    }

    /// A parser message as kc words its own: no "Error: ", a lower-case start, no
    /// full stop, and the parser's suggestion of the nearest option kept in brackets.
    static func kcStyle(_ message: String) -> String {
        var text = Substring(message)
        if text.hasPrefix("Error: ") { text = text.dropFirst(7) }
        if text.hasSuffix(".") { text = text.dropLast() }
        var words = String(text)
        let suggestion = words.split(separator: ". Did you mean ", maxSplits: 1, omittingEmptySubsequences: false)
        if suggestion.count == 2 { words = suggestion[0] + " (did you mean " + suggestion[1] + ")" }
        // "Missing", "Unknown", "Unexpected": not a name or an acronym such as "SERVICE".
        let start = words.prefix(2)
        if start.count == 2, start.first!.isUppercase, start.last!.isLowercase {
            words = start.first!.lowercased() + words.dropFirst()
        }
        return words
    }

    /// Where a usage error points: the command's own help when argv names one.
    private static var helpHint: String {
        var command: any ParsableCommand.Type = KC.self
        var path: [String] = []
        for argument in CommandLine.arguments.dropFirst() {
            guard let sub = command.configuration.subcommands.first(where: { $0._commandName == argument }) else { break }
            command = sub
            path.append(argument)
        }
        return path.isEmpty ? "'kc --help'" : "'kc help \(path.joined(separator: " "))'"
    }

    /// The subcommands' names, and `help`.
    private static var commandNames: [String] { configuration.subcommands.map { $0._commandName } + ["help"] }

    /// Bare `kc`: what it is for, in a few lines, on standard error; exits 64 as any
    /// usage error does.
    static func shortUsage() -> Never {
        standardError("""
            usage: kc COMMAND [ARGUMENTS]
              kc set SERVICE ITEM          store a value from standard input (or type it)
              kc get SERVICE ITEM          print it
              kc ls [SERVICE]              list services, or a service's items
              kc find PATTERN              find services and items by name
              kc rm SERVICE [ITEM]         remove an item, or a whole service
              kc mount ~/kc                show the keychain as files
              kc doctor                    check this machine
            every command: kc --help; one command: kc help COMMAND
            """)
        Glibc.exit(ExitStatus.usage.rawValue)
    }
}

let kcVersion = "0.1.0"
