import KCIntegrations
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads standard input (or `fd`) to its end, but at most `limit + 1` bytes, so an
/// oversize value is detected without holding all of it. Nil on a read error, with
/// `errno` set. The caller zeroes the result.
///
/// `endsAt`, when given, is asked after each read where the input ends within the bytes
/// read so far (it is given the range that is new, and the byte before it); the read
/// stops there and what came after is zeroed (git's credential protocol ends at an
/// empty line).
func readStandardInput(fd: Int32 = 0, limit: Int,
                       endsAt end: ((_ bytes: [UInt8], _ new: Range<Int>) -> Int?)? = nil) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: limit + 1)
    var count = 0
    while count < bytes.count {
        let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if got < 0 {
            if errno == EINTR { continue }
            let error = errno
            bytes.overwriteWithZeros()
            errno = error
            return nil
        }
        if got == 0 { break }
        let scanFrom = max(count - 1, 0)
        count += got
        if let end, let stop = end(bytes, scanFrom..<count) {
            for index in stop..<count { bytes[index] = 0 }
            count = stop
            break
        }
    }
    // What follows `count` was never written (or was zeroed above): shrinking leaves
    // no stray copy behind.
    bytes.removeSubrange(count...)
    return bytes
}

/// An item's value on standard input (`kc set`, `kc podman-driver store`), read to its
/// end but never more than one byte over the most an item can hold: 100 MB piped in
/// is refused after 32 KiB, not held. Over that, one line says so (`what`: "the
/// value", "the secret") and the command exits 2. Nil on a read error, with `errno`
/// set. The caller zeroes the result.
func readItemValue(what: String) throws -> [UInt8]? {
    guard var value = readStandardInput(limit: KeychainError.maximumValueSize) else { return nil }
    guard value.count <= KeychainError.maximumValueSize else {
        value.overwriteWithZeros()
        standardError("kc: \(what) on standard input is larger than \(KeychainError.maximumValueSize) bytes, the most an item can hold; store a smaller value (or a path to a file)")
        throw ExitStatus.failure
    }
    return value
}

/// Whether standard input is a terminal (a person typing rather than a pipe).
var standardInputIsTerminal: Bool { isatty(0) == 1 }

/// Prompts on standard error and reads one line from the terminal with echo off.
/// The line ending is not part of the value. Nil if the terminal closes.
///
/// Echo goes off before the prompt is shown, as getpass(3) does: TCSAFLUSH drops what
/// was typed before the prompt (which was echoed), and an answer typed as soon as the
/// prompt shows is never dropped (turning echo off after the prompt lost such an
/// answer, and kc then waited for a line that had already been typed). Echo comes
/// back without dropping anything typed since.
func readSecretLine(prompt: String) -> [UInt8]? {
    var saved = termios()
    let haveTerminal = tcgetattr(0, &saved) == 0
    if haveTerminal {
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(0, TCSAFLUSH, &quiet)
    }
    standardErrorRaw(prompt)
    defer {
        if haveTerminal { _ = tcsetattr(0, TCSANOW, &saved) }
        standardErrorRaw("\n")
    }
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while true {
        let got = read(0, &byte, 1)
        if got < 0 && errno == EINTR { continue }
        if got <= 0 { return line.isEmpty ? nil : line }
        if byte == UInt8(ascii: "\n") { return line }
        line.append(byte)
    }
}

private func standardErrorRaw(_ text: String) {
    var text = text
    text.withUTF8 { _ = writeAll(fd: 2, UnsafeRawBufferPointer($0)) }
}

/// Lines for standard output whose parts may be names that are not UTF-8, kept byte
/// for byte (`print` would repair such bytes), written with one `write` at the end.
struct OutputLines {
    private var bytes: [UInt8] = []

    mutating func add(_ parts: any KeyNameConvertible...) {
        for part in parts { bytes += part.keyName.bytes }
        bytes.append(UInt8(ascii: "\n"))
    }

    /// Writes the lines to standard output (``writeStandardOutput(_:)``).
    func write() throws {
        try writeStandardOutput(bytes)
    }
}

/// Writes `bytes` to standard output whole. A write that fails (standard output closed,
/// a full disk, a reader gone) is reported in one line and exits 2, as `kc get` does:
/// a script must not take a cut-off listing for the whole.
func writeStandardOutput(_ bytes: [UInt8]) throws {
    guard bytes.withUnsafeBytes({ writeAll(fd: 1, $0) }) else { throw OutputFailure(errno: errno) }
}

/// Reports what `print` could not write: stdio holds the output until the stream is
/// flushed, so the exits flush every stream here (`fflush(NULL)`: Swift 6 does not let
/// code name the global `stdout`) and report a failure.
func flushStandardOutput() throws {
    if fflush(nil) != 0 { throw OutputFailure(errno: errno) }
}

/// Standard output could not be written; the exits report it once (exit 2).
struct OutputFailure: Error {
    var errno: Int32
    var message: String { "cannot write to standard output: \(String(cString: strerror(errno)))" }
}
