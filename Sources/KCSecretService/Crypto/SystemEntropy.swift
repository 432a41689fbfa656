#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes from the kernel's cryptographically secure random number generator.
///
/// `getentropy` rather than the standard library's `SystemRandomNumberGenerator`: both
/// read getrandom(2), but the standard library traps when it fails, and a daemon
/// should answer the one request with an error instead.
enum SystemEntropy {
    /// The most `getentropy` gives in one call.
    private static let maximumRequest = 256

    /// Fills `buffer` with random bytes. The corresponding C function is `getentropy`,
    /// which blocks until the kernel's pool is initialised and retries on EINTR.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(SecretCryptoError) {
        guard read(into: buffer) else { throw .randomFailed }
    }

    /// `count` random bytes.
    static func bytes(count: Int) throws(SecretCryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard bytes.withUnsafeMutableBytes({ read(into: $0) }) else { throw .randomFailed }
        return bytes
    }

    /// Whether `getentropy` filled all of `buffer`, asking at most 256 bytes at a time.
    private static func read(into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress else { return true }
        var offset = 0
        while offset < buffer.count {
            let length = min(maximumRequest, buffer.count - offset)
            guard getentropy(base + offset, length) == 0 else { return false }
            offset += length
        }
        return true
    }
}
