import Age

/// Zeroing through Age's `overwriteWithZeros(_:)`, a call the optimiser may not drop.
func zeroBytes(_ bytes: UnsafeMutableRawBufferPointer) {
    overwriteWithZeros(bytes)
}

extension Array where Element: FixedWidthInteger {
    /// Zeroes the array's elements in place. The array must be the only owner of its
    /// storage (a shared copy would be copied first, and only the copy zeroed).
    mutating func zeroize() {
        withUnsafeMutableBytes { zeroBytes($0) }
    }
}
