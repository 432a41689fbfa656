import Crypto

/// A server key pair, used for one session only: the server's half of the Secret
/// Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` key agreement (Diffie-Hellman in the
/// 1024-bit group of RFC 2409, then HKDF-SHA256 to an AES-128 key).
///
/// `OpenSession` is answered with `publicKey`; the client's public key, from the same
/// call, gives `sharedAESKey(clientPublicKey:)`. The private exponent is zeroed when the
/// last copy of the key pair goes away.
public struct DHKeyPair: Sendable {
    /// The server's public key 2^x mod p, as 128 big-endian bytes (left-padded with
    /// zeros), the form to send the client.
    public let publicKey: [UInt8]

    private let exponent: PrivateExponent

    /// A fresh key pair: a 256-bit private exponent from the kernel's random number
    /// generator (`PrivateExponent` says why 256 bits suffice), and its public key.
    public static func generate() throws(SecretCryptoError) -> DHKeyPair {
        guard OakleyGroup2.libraryIsReady else { throw .libraryUnavailable }
        let exponent = try PrivateExponent()
        let publicKey = exponent.withBytes { OakleyGroup2.powerOfTwo(exponent: $0) }
        return DHKeyPair(publicKey: publicKey, exponent: exponent)
    }

    /// The 16-byte AES key shared with a client whose public key is `clientPublicKey`.
    /// Refuses a public key that is not in 2 ... p-2 (0, 1, p-1 and values >= p), or
    /// longer than 128 bytes after stripping leading zeros.
    ///
    /// The shared secret y^x mod p is left-padded to 128 bytes (a client may send its
    /// own key shorter, but the secret's encoding is fixed) and goes through HKDF-SHA256
    /// with no salt and empty info; its first 16 bytes are the key.
    public func sharedAESKey(clientPublicKey: [UInt8]) throws(SecretCryptoError) -> [UInt8] {
        let clientValue = try OakleyGroup2.publicValue(bigEndian: clientPublicKey)
        var sharedSecret = exponent.withBytes { OakleyGroup2.power(base: clientValue, exponent: $0) }
        defer { sharedSecret.zeroize() }
        // SymmetricKey keeps its own copy in memory it zeroes when freed.
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: sharedSecret), outputByteCount: 16)
        return key.withUnsafeBytes { Array($0) }
    }
}
