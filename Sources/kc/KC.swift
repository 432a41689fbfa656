import ArgumentParser
import KernelKeychain

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
        subcommands: [Set.self, Get.self, Remove.self, List.self, Doctor.self]
    )

    /// Parse errors become one `kc: ` line and exit 64; help and --version print as usual.
    static func main() {
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
