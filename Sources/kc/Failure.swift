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

/// Reports a keychain failure and returns the exit code to throw. Bad names and
/// timeouts are usage errors; everything else is a failure.
func fail(_ error: KeychainError) -> ExitCode {
    standardError("kc: \(error)")
    switch error {
    case .invalidName, .invalidTimeout, .invalidWorkFactor: return ExitStatus.usage
    case .vaultLocked: return ExitStatus.notFound
    default: return ExitStatus.failure
    }
}

/// Runs a keychain operation, turning its typed error into a reported exit code.
func reporting<R>(_ body: () throws(KeychainError) -> R) throws(ExitCode) -> R {
    do {
        return try body()
    } catch {
        throw fail(error)
    }
}

/// Checks a name in `validate()`, so a bad one is a usage error before any kernel call.
func validateArgument(_ name: some KeyNameConvertible, as kind: NameKind) throws(ExitCode) {
    try reporting { () throws(KeychainError) in try validateName(name, as: kind) }
}
