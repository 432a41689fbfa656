import ArgumentParser
import KernelKeychain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where a vault passphrase comes from: the terminal (asked without echo), a file
/// descriptor (`--passphrase-fd N`), or standard input when it is not a terminal.
/// Never the command line, where other users would see it.
struct PassphraseOptions: ParsableArguments {
    // Unconditional, as every option taking a number: `--passphrase-fd -5` is a bad
    // descriptor, not a missing one followed by an option named -5.
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Read the passphrase from this file descriptor (to its end; one trailing newline is dropped) instead of the terminal or standard input.",
        valueName: "fd"))
    var passphraseFD: Int32?

    func validate() throws {
        if let passphraseFD { try validateDescriptor(passphraseFD, option: "--passphrase-fd") }
    }

    /// Where ``read(prompt:confirm:)`` reads, for messages.
    var source: String {
        if let passphraseFD { return "--passphrase-fd \(passphraseFD)" }
        return standardInputIsTerminal ? "the terminal" : "standard input"
    }

    /// The passphrase; `confirm` asks twice at a terminal. The caller zeroes it.
    func read(prompt: String, confirm: Bool = false) throws -> [UInt8] {
        if let fd = passphraseFD { return try readPassphrase(fd: fd, what: "--passphrase-fd \(fd)") }
        if standardInputIsTerminal { return try askAtTerminal(prompt: prompt, confirm: confirm) }
        return try readPassphrase(fd: 0, what: "standard input")
    }
}

/// Asks at the terminal without echo; `confirm` asks twice. `missing` and `mismatch`
/// are the errors for no entry and for two entries that differ.
func askAtTerminal(prompt: String, confirm: Bool, missing: String = "no passphrase entered",
                   mismatch: String = "the two entries differ; nothing was changed, try again") throws -> [UInt8] {
    guard var first = readSecretLine(prompt: prompt) else {
        standardError("kc: " + missing)
        throw ExitStatus.failure
    }
    guard confirm else { return first }
    guard var second = readSecretLine(prompt: "Again to confirm: ") else {
        first.overwriteWithZeros()
        standardError("kc: " + missing)
        throw ExitStatus.failure
    }
    defer { second.overwriteWithZeros() }
    guard first == second else {
        first.overwriteWithZeros()
        standardError("kc: " + mismatch)
        throw ExitStatus.failure
    }
    return first
}

/// Reads a passphrase to the end of `fd` (at most 4096 bytes), dropping one trailing
/// newline (`echo pass | kc unlock`).
func readPassphrase(fd: Int32, what: String, keepNewline: Bool = false, limit: Int = 4096) throws -> [UInt8] {
    guard var bytes = readStandardInput(fd: fd, limit: limit) else {
        standardError("kc: cannot read the passphrase from \(what): \(String(cString: strerror(errno))); pass an open descriptor")
        throw ExitStatus.usage
    }
    guard bytes.count <= limit else {
        bytes.overwriteWithZeros()
        standardError("kc: the passphrase from \(what) is over \(limit) bytes; is that the right input?")
        throw ExitStatus.failure
    }
    if !keepNewline, bytes.last == UInt8(ascii: "\n") {
        bytes.removeLast()
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }  // a file saved with CRLF line ends
    }
    return bytes
}

/// Refuses a new passphrase that no login and no one-line prompt could ever give: one
/// with a line break or a NUL byte in it (`printf 'pw\npw\n' | kc vault init`, answering
/// twice as a terminal would ask, reads as the passphrase "pw\npw"). PAM passes the
/// login password as one line without NUL; `kc unlock` drops one trailing newline.
func requireOneLine(_ passphrase: [UInt8], what: String) throws {
    if let bad = passphrase.first(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == 0 }) {
        let kind = bad == 0 ? "a NUL byte" : "a line break"
        standardError("kc: the new passphrase from \(what) holds \(kind), so no login could ever type it; give it once, on one line (printf '%s\\n' PASSPHRASE | kc vault init); nothing was changed")
        throw ExitStatus.usage
    }
}

/// A file descriptor given on the command line is 0 or more.
func validateDescriptor(_ fd: Int32, option: String) throws {
    guard fd >= 0 else { throw ValidationError("\(option) takes an open file descriptor's number, 0 or more; not '\(fd)'") }
}

/// An scrypt work factor `kc vault init` and `passwd` accept.
func validateWorkFactor(_ factor: Int) throws {
    guard (10...Vault.maximumWorkFactor).contains(factor) else {
        throw ValidationError("invalid work factor \(factor): use 10 to \(Vault.maximumWorkFactor)")
    }
}
