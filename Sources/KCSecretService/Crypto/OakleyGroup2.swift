import CGcrypt

/// The 1024-bit MODP group of RFC 2409 (the second Oakley group), generator 2: the
/// group of the Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` transport. Its
/// modular powers are libgcrypt's (`gcry_mpi_powm`), as in gnome-keyring. Numbers cross
/// as big-endian bytes; results are left-padded to 128 bytes, the encoding the key
/// derivation hashes and the client is sent.
enum OakleyGroup2 {
    static let byteCount = 128

    /// p = 2^1024 - 2^960 - 1 + 2^64 · (⌊2^894 π⌋ + 129093), big-endian.
    static let prime: [UInt8] = bytes(hex: """
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74\
        020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437\
        4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF
        """)

    /// A client's public key as a number in 2 ... p-2, left-padded to 128 bytes; leading
    /// zeros are allowed, more than 128 significant bytes are not.
    static func publicValue(bigEndian bytes: [UInt8]) throws(SecretCryptoError) -> [UInt8] {
        let significant = Array(bytes.drop(while: { $0 == 0 }))
        guard significant.count <= byteCount else { throw .invalidPublicKey }
        let value = [UInt8](repeating: 0, count: byteCount - significant.count) + significant
        // Both are 128 bytes: compared as big-endian numbers, lexicographically.
        guard value.lexicographicallyPrecedes(prime.subtracting(1)), !value.lexicographicallyPrecedes(padded([2])) else {
            throw .invalidPublicKey
        }
        return value
    }

    /// Whether libgcrypt is there and new enough: checked before any key agreement
    /// (``DHKeyPair``), so a library older than the build's answers the client with an
    /// error instead of stopping the daemon.
    static let libraryIsReady: Bool = kc_gcrypt_initialize() == 0

    /// 2^exponent mod p.
    static func powerOfTwo(exponent: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        power(base: [2], exponent: exponent)
    }

    /// base^exponent mod p, `base` below p (checked by the caller: ``publicValue(bigEndian:)``).
    static func power(base: [UInt8], exponent: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        precondition(libraryIsReady, "DHKeyPair checks libgcrypt before any power")
        let modulus = number(prime), baseValue = number(base)
        let exponentValue = exponent.isEmpty ? gcry_mpi_new(0) : number(UnsafeRawBufferPointer(exponent))
        let result = gcry_mpi_new(UInt32(byteCount * 8))
        defer { for value in [modulus, baseValue, exponentValue, result] { gcry_mpi_release(value) } }
        gcry_mpi_powm(result, baseValue, exponentValue, modulus)
        var written = 0
        var bytes = [UInt8](repeating: 0, count: byteCount)
        let printed = bytes.withUnsafeMutableBytes { gcry_mpi_print(GCRYMPI_FMT_USG, $0.baseAddress, byteCount, &written, result) }
        precondition(printed == 0 && written <= byteCount, "a power mod p fits in 128 bytes")
        // gcry_mpi_print writes the significant bytes only: move them right, zeros in front.
        let padded = [UInt8](repeating: 0, count: byteCount - written) + bytes[..<written]
        bytes.zeroize()
        return padded
    }

    /// An unsigned big-endian number as a libgcrypt MPI (the caller releases it, which
    /// wipes it).
    private static func number(_ bytes: [UInt8]) -> gcry_mpi_t? {
        bytes.withUnsafeBytes { number($0) }
    }

    private static func number(_ bytes: UnsafeRawBufferPointer) -> gcry_mpi_t? {
        var value: gcry_mpi_t? = nil
        let scanned = gcry_mpi_scan(&value, GCRYMPI_FMT_USG, bytes.baseAddress, bytes.count, nil)
        precondition(scanned == 0, "libgcrypt reads any unsigned big-endian number")
        return value
    }

    static func padded(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](repeating: 0, count: byteCount - bytes.count) + bytes
    }

    private static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            result.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
        }
        return result
    }
}

extension [UInt8] {
    /// This big-endian number minus `delta` (a small one), for the group's edges.
    func subtracting(_ delta: UInt8) -> [UInt8] {
        var result = self
        var borrow = Int(delta)
        for index in result.indices.reversed() where borrow != 0 {
            let value = Int(result[index]) - borrow
            result[index] = UInt8((value + 256) % 256)
            borrow = value < 0 ? 1 : 0
        }
        return result
    }
}
