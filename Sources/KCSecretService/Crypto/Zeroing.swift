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
func zeroBytes(_ bytes: UnsafeMutableRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    #if canImport(Darwin)
    _ = memset_s(base, bytes.count, 0, bytes.count)
    #else
    explicit_bzero(base, bytes.count)
    #endif
}

extension Array where Element: FixedWidthInteger {
    /// Zeroes the array's elements in place. The array must be the only owner of its
    /// storage (a shared copy would be copied first, and only the copy zeroed).
    mutating func zeroize() {
        withUnsafeMutableBytes { zeroBytes($0) }
    }
}

extension Data {
    /// Zeroes the bytes in place; as for arrays, the value must own its storage. Only
    /// for Data this module owns (AES._CBC.decrypt's result).
    mutating func zeroize() {
        withUnsafeMutableBytes { zeroBytes($0) }
    }
}
