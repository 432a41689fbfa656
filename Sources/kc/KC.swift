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
        subcommands: [Set.self, Get.self, Remove.self, List.self, Share.self, Unshare.self, Mount.self, Umount.self, Exec.self, PodmanDriver.self, CredentialServer.self, Export.self, Import.self, VaultCommand.self, Unlock.self, Lock.self, Doctor.self]
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
        do {
            var command = try parseAsRoot()
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
        if var message = fullMessage(for: error).split(separator: "\n").first.map(String.init) {
            if message.hasPrefix("Error: ") { message.removeFirst(7) }
            if message.hasSuffix(".") { message.removeLast() }
            standardError("kc: \(message); see 'kc --help'")
        }
        Glibc.exit(code.rawValue)
    }
}

let kcVersion = "0.1.0"
