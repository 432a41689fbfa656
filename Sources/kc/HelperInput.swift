import KCIntegrations
import KernelKeychain

/// What a credential helper read on standard input.
enum HelperInput {
    case bytes([UInt8])
    case tooLong
    case unreadable
}

/// Reads a helper's standard input to its end, or to where `endsAt` says the protocol's
/// input ends (git's at the first empty line), but never more than `limit` bytes: a
/// client sends a few short lines, so more is refused rather than held. The caller
/// zeroes it.
func readHelperInput(limit: Int, endsAt end: ((_ bytes: [UInt8], _ new: Range<Int>) -> Int?)? = nil) -> HelperInput {
    guard var bytes = readStandardInput(limit: limit, endsAt: end) else {
        return .unreadable
    }
    if bytes.count > limit {
        bytes.overwriteWithZeros()
        return .tooLong
    }
    return .bytes(bytes)
}

/// Writes bytes to standard output, then zeroes them (they may hold a secret).
@discardableResult
func writeSecretOutput(_ bytes: inout [UInt8]) -> Bool {
    let written = bytes.withUnsafeBytes { writeAll(fd: 1, $0) }
    bytes.overwriteWithZeros()
    return written
}
