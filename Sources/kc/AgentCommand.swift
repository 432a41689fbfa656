import ArgumentParser

#if canImport(Glibc)
import Glibc
#endif

extension KC {
    /// `kc agent`: runs kc-agent, installed beside kc, which keeps kc in step with an
    /// OpenBao cluster. A program of its own so that kc loads no TLS library.
    struct AgentCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent",
            abstract: "Keep secrets from OpenBao (KV v2, leases) in kc: kc-agent run|sync|check CONFIG.",
            discussion: """
            kc agent run CONFIG     keep kc in step with OpenBao until stopped
            kc agent sync CONFIG    log in, mirror every secret once, exit (0: all synced)
            kc agent check CONFIG   read CONFIG and print what it syncs

            CONFIG is a JSON file; 'man kc-agent' describes it. AppRole's role id and
            secret id are kc items (kc set openbao role_id; kc set openbao secret_id); the
            token is kept in kc with its TTL as the item's deadline. Each KV secret is
            mirrored into a service of its own, a whole version at a time.
            """
        )

        @Argument(parsing: .captureForPassthrough, help: "run, sync or check, and the configuration file.")
        var arguments: [String] = []

        func run() throws {
            let program = siblingExecutable("kc-agent")
            let argv = [program] + arguments
            var cArguments = argv.map { strdup($0) } + [nil]
            execv(program, &cArguments)
            let reason = String(cString: strerror(errno))
            var line = Array("kc: cannot run \(program) (\(reason)): install kc-agent beside kc (./Tools/setup.sh does)\n".utf8)
            _ = write(2, &line, line.count)
            throw ExitCode(69)
        }
    }
}
