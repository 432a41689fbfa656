/// The server's private Diffie-Hellman exponent x for one session: 256 bits from the
/// kernel's random number generator, held in memory that is zeroed when the last key
/// pair sharing it goes away.
///
/// Why 256 bits and not 1023: an exponent known to have n bits falls to Pollard's
/// kangaroo method in about 2^(n/2) steps, so it needs twice as many bits as the
/// security wanted, and the 1024-bit group itself gives only about 80 bits (the number
/// field sieve). NIST SP 800-56A Rev. 3 (for safe-prime groups), RFC 3526 §8 and
/// RFC 7919 §5.2 allow exponents of twice the security strength; 256 bits is more than
/// the 160 this group needs. It is safe here because p is a safe prime, p = 2q + 1, and
/// 2 generates the subgroup of prime order q ≈ 2^1023: there is no small subgroup whose
/// order would leak bits of x (Pohlig–Hellman), and the client's value is still checked
/// to lie in 2 … p − 2 (`OakleyGroup2.publicValue`). A short exponent makes the
/// client's key's power four times cheaper than a full-length one.
final class PrivateExponent: @unchecked Sendable {
    /// Bytes of the exponent (big-endian; random, so the order does not matter).
    static let byteCount = 32

    // Written only in `init` and `deinit`, so sharing it between threads is safe.
    private let bytes: UnsafeMutablePointer<UInt8>

    init() throws(SecretCryptoError) {
        bytes = .allocate(capacity: Self.byteCount)
        bytes.initialize(repeating: 0, count: Self.byteCount)
        let buffer = UnsafeMutableRawBufferPointer(start: bytes, count: Self.byteCount)
        repeat {
            try SystemEntropy.fill(buffer)
        } while buffer.dropLast().allSatisfy({ $0 == 0 }) && buffer[Self.byteCount - 1] < 2
    }

    deinit {
        zeroBytes(UnsafeMutableRawBufferPointer(start: bytes, count: Self.byteCount))
        bytes.deallocate()
    }

    func withBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        body(UnsafeBufferPointer(start: bytes, count: Self.byteCount))
    }
}
