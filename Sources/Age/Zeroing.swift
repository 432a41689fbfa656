#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Overwrites `bytes` with zeros through a call the optimiser may not drop (a plain
/// store to memory that is about to be freed can be removed as dead).
public func overwriteWithZeros(_ bytes: UnsafeMutableRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    #if canImport(Darwin)
    _ = memset_s(base, bytes.count, 0, bytes.count)
    #else
    explicit_bzero(base, bytes.count)
    #endif
}

extension Array where Element == UInt8 {
    /// Zeroes the array's bytes in place. The array must be the only owner of its
    /// storage (a shared copy would be copied first, and only the copy zeroed).
    mutating func zeroize() {
        withUnsafeMutableBytes { overwriteWithZeros($0) }
    }
}

extension Data {
    /// Zeroes the bytes in place; as for arrays, the value must own its storage.
    /// Only for Data this module owns (ChaChaPoly.open's result): a swift-crypto
    /// key's `rawRepresentation` shares the key's own storage, and zeroing it
    /// would zero the key.
    mutating func zeroize() {
        withUnsafeMutableBytes { overwriteWithZeros($0) }
    }
}
