import ArgumentParser
import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Exit statuses of DESIGN §5.
enum ExitStatus {
    static let notFound = ExitCode(1)
    static let failure = ExitCode(2)
    static let usage = ExitCode(64)
}

/// Prints one `kc: ` line to standard error.
func standardError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = writeAll(fd: 2, UnsafeRawBufferPointer(bytes)) }
}

/// Reports a keychain failure and returns its exit code. Bad names and timeouts are
/// usage errors; everything else is a failure. Commands let a ``KeychainError``
/// propagate: the exits convert it here, `KC.exit(after:)` for both the parsed
/// commands and ``FastPath``, and ``validateArgument(_:as:)`` inside `validate()`.
func fail(_ error: KeychainError) -> ExitCode {
    standardError("kc: \(error)")
    switch error {
    case .invalidName, .invalidTimeout, .invalidWorkFactor: return ExitStatus.usage
    case .vaultLocked, .vaultKeepsForLoginSessions: return ExitStatus.notFound
    default: return ExitStatus.failure
    }
}

/// Checks a name in `validate()`, so a bad one is a usage error before any kernel call.
/// Converted here, not at the exit: ArgumentParser wraps whatever `validate()` throws
/// in an error of its own, out of the exit's reach.
func validateArgument(_ name: some KeyNameConvertible, as kind: NameKind) throws(ExitCode) {
    do {
        try validateName(name, as: kind)
    } catch {
        throw fail(error)
    }
}
