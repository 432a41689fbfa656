import KCIntegrations
import KernelKeychain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `git-credential-kc get|store|erase`: git's credential helper, run when kc is called
/// by that name (`git config --global credential.helper kc`). This reads the command
/// line and standard input and reports; the protocol and the keyring mapping are
/// ``GitCredentialHelper``'s.
///
/// New credentials go to the level `--access LEVEL` names (git passes the helper's
/// arguments before the action: `credential.helper = kc --access after-first-unlock`),
/// by default `when-unlocked`; get and erase find an item at any level.
///
/// Unknown actions are ignored, as git requires. Nothing secret is in argv: git passes
/// only the action there.
enum GitCredentialCommand {
    enum Action { case get, store, erase }

    /// Runs the helper with argv as the kernel passed it; exits 0 on success (and for
    /// an action git may add later), 2 on a failure, 64 on a wrong command line.
    static func main() -> Never {
        let argv = CommandLine.unsafeArgv
        let usage = "kc: usage: git-credential-kc [--access LEVEL] get|store|erase; git runs it for you after 'git config --global credential.helper kc'"
        // git puts the helper's own arguments before the action:
        // credential.helper = "kc --access after-first-unlock".
        var level = Accessibility.Level.whenUnlocked
        if CommandLine.argc == 4, let option = argv[1], let name = argv[2], strcmp(option, "--access") == 0 {
            guard let chosen = Accessibility.Level(rawValue: String(cString: name)) else {
                standardError("kc: git-credential-kc: --access takes when-unlocked, after-first-unlock or always (got '\(String(cString: name))')")
                exit(ExitStatus.usage.rawValue)
            }
            level = chosen
        } else if CommandLine.argc != 2 {
            standardError(usage)
            exit(ExitStatus.usage.rawValue)
        }
        guard let word = argv[Int(CommandLine.argc) - 1] else {
            standardError(usage)
            exit(ExitStatus.usage.rawValue)
        }
        let action: Action
        if strcmp(word, "get") == 0 { action = .get }
        else if strcmp(word, "store") == 0 { action = .store }
        else if strcmp(word, "erase") == 0 { action = .erase }
        else { exit(0) }  // git: "If a helper receives any other operation, it should silently ignore the request."

        let inputLimit = GitCredentialHelper.inputLimit
        var input: [UInt8]
        switch readHelperInput(limit: inputLimit, endsAt: { GitCredentialHelper.blankLineEnd(in: $0, $1) }) {
        case .bytes(let bytes): input = bytes
        case .tooLong:
            standardError("kc: git-credential-kc: the input is over \(inputLimit) bytes; git sends a few key=value lines")
            exit(ExitStatus.failure.rawValue)
        case .unreadable:
            standardError("kc: git-credential-kc: cannot read standard input: \(String(cString: strerror(errno)))")
            exit(ExitStatus.failure.rawValue)
        }
        var credential: GitCredentialHelper.Credential
        do {
            credential = try GitCredentialHelper.parse(input)
        } catch {
            input.overwriteWithZeros()
            standardError("kc: git-credential-kc: \(error.message)")
            exit(ExitStatus.failure.rawValue)
        }
        input.overwriteWithZeros()
        defer { credential.overwriteWithZeros() }
        do throws(GitCredentialHelper.Failure) {
            switch action {
            case .get:
                var answer = try GitCredentialHelper.get(credential)
                guard writeSecretOutput(&answer) else { throw GitCredentialHelper.Failure("cannot write to standard output") }
            case .store: try GitCredentialHelper.store(credential, at: Accessibility(level: level, thisDeviceOnly: false))
            case .erase: try GitCredentialHelper.erase(credential)
            }
        } catch {
            standardError("kc: git-credential-kc: \(error.message)")
            exit(ExitStatus.failure.rawValue)
        }
        exit(0)
    }
}
