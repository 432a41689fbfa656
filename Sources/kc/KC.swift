import ArgumentParser
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `kc` command: a root that only configures; each subcommand lives in its own file.
@main
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
            if strcmp(name, "git-credential-kc") == 0 { GitCredentialHelper.main() }
            if strcmp(name, "docker-credential-kc") == 0 { DockerCredentialHelper.main() }
        }
        // `kc get SERVICE KEY` is the call programs make in a loop, and it should cost
        // what C's `keyctl pipe` costs. Parsing with ArgumentParser reflects over the
        // command types, and the Swift runtime's first conformance lookups scan every
        // conformance record in this static binary: about 2 ms, more than the rest of the
        // process together (docs/BENCHMARKS.md). So the plain forms skip the parser and
        // call the same function the parsed `Get` command runs (see ``FastGet``).
        if let request = FastGet.fromCommandLine() {
            runFastGet(request)
        }
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let exit as ExitCode {
            Glibc.exit(exit.rawValue)
        } catch {
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
}

let kcVersion = "0.1.0"

/// The unparsed `kc get`: exits with DESIGN §5's status.
private func runFastGet(_ request: FastGet) -> Never {
    do {
        let service = KeyName(cString: request.service), key = KeyName(cString: request.key)
        try validateArgument(service, as: .service)
        try validateArgument(key, as: .item)
        let group = request.group.map { String(cString: $0) }, owner = request.owner.map { String(cString: $0) }
        let keychain = try reporting { () throws(KeychainError) in
            try Keychain(service: service, accessGroup: group, owner: owner)
        }
        let options = (group.map { "--group \($0) " } ?? "") + (owner.map { "--from \($0) " } ?? "")
        try printValue(keychain: keychain, key: key, options: options, quiet: request.quiet)
        Glibc.exit(0)
    } catch let code as ExitCode {
        Glibc.exit(code.rawValue)
    } catch {
        Glibc.exit(ExitStatus.failure.rawValue)
    }
}
