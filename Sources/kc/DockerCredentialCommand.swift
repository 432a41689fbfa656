import KCIntegrations

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `docker-credential-kc store|get|erase|list|version`: the credential helper of docker
/// and podman, run when kc is called by that name (`"credsStore": "kc"` or
/// `"credHelpers": {"HOST": "kc"}`). This reads the command line and standard input and
/// writes the answer; the protocol and the keyring mapping are ``DockerCredentialHelper``'s.
///
/// As the reference helpers do, every answer and every error goes to standard output
/// (the clients read errors there), and any failure exits 1.
enum DockerCredentialCommand {
    typealias Failure = DockerCredentialHelper.Failure

    static func main() -> Never {
        let argv = CommandLine.unsafeArgv
        guard CommandLine.argc == 2, let word = argv[1] else {
            answerFailure("Usage: docker-credential-kc <store|get|erase|list|version>")
        }
        do throws(Failure) {
            if strcmp(word, "store") == 0 {
                var input = try readInput()
                defer { input.overwriteWithZeros() }
                try DockerCredentialHelper.store(input)
            } else if strcmp(word, "get") == 0 {
                var answer = try DockerCredentialHelper.get(readInput())
                guard writeSecretOutput(&answer) else { exit(1) }
            } else if strcmp(word, "erase") == 0 {
                try DockerCredentialHelper.erase(readInput())
            } else if strcmp(word, "list") == 0 {
                let answer = try DockerCredentialHelper.list()
                answer.withUnsafeBytes { _ = writeAll(fd: 1, $0) }
            } else if strcmp(word, "version") == 0 {
                answer("docker-credential-kc (kc) \(kcVersion)\n")
            } else {
                throw Failure("Unknown credential action `\(String(cString: word))`")
            }
        } catch {
            answerFailure(error.message)
        }
        exit(0)
    }

    private static func readInput() throws(Failure) -> [UInt8] {
        let inputLimit = DockerCredentialHelper.inputLimit
        switch readHelperInput(limit: inputLimit) {
        case .bytes(let bytes): return bytes
        case .tooLong: throw Failure("kc: the input is over \(inputLimit) bytes; a credential is much shorter")
        case .unreadable: throw Failure("kc: cannot read standard input: \(String(cString: strerror(errno)))")
        }
    }

    /// Writes an answer to standard output.
    private static func answer(_ text: String) {
        var text = text
        text.withUTF8 { _ = writeAll(fd: 1, UnsafeRawBufferPointer($0)) }
    }

    /// Writes the error line to standard output, where clients read it, and exits 1.
    private static func answerFailure(_ message: String) -> Never {
        answer(message + "\n")
        exit(1)
    }
}
