import CGcrypt

/// The secrets of a `dh-ietf1024-sha256-aes128-cbc-pkcs7` session: AES-128-CBC with
/// PKCS#7 padding under the session's key, the 16-byte initialisation vector sent as
/// the secret's parameters.
///
/// There is no MAC: the transport protects a secret on the bus against a passive
/// observer, and the padding check is the only sign of a wrong key. The cipher is
/// libgcrypt's, as the session's modular power is (``OakleyGroup2``): a secret is
/// sealed in place in one buffer, with no copy through `Data`, and a secret opened
/// that fails its padding check is zeroed before the error.
public enum SecretCipher {
    /// Bytes in an AES block, an AES-128 key and an initialisation vector.
    private static let blockSize = 16

    /// (iv, ciphertext) with a fresh IV from the system CSPRNG.
    public static func encrypt(_ plain: [UInt8], key: [UInt8]) throws(SecretCryptoError) -> (parameters: [UInt8], value: [UInt8]) {
        guard key.count == blockSize else { throw .badKey }
        let iv = try SystemEntropy.bytes(count: blockSize)
        // PKCS#7: 1 to 16 bytes, each holding their count.
        let padding = blockSize - plain.count % blockSize
        var value = [UInt8](repeating: UInt8(padding), count: plain.count + padding)
        value.replaceSubrange(0..<plain.count, with: plain)
        do throws(SecretCryptoError) {
            try crypt(&value, key: key, iv: iv, encrypting: true)
        } catch {
            value.zeroize()
            throw error
        }
        return (iv, value)
    }

    /// Refuses wrong IV length, ciphertext not a multiple of 16, bad padding.
    public static func decrypt(_ value: [UInt8], parameters: [UInt8], key: [UInt8]) throws(SecretCryptoError) -> [UInt8] {
        guard key.count == blockSize else { throw .badKey }
        guard parameters.count == blockSize else { throw .badParameters }
        guard !value.isEmpty, value.count % blockSize == 0 else { throw .badCiphertext }
        var plain = value
        do throws(SecretCryptoError) {
            try crypt(&plain, key: key, iv: parameters, encrypting: false)
        } catch {
            plain.zeroize()
            throw error
        }
        let padding = Int(plain[plain.count - 1])
        guard (1...blockSize).contains(padding), plain[(plain.count - padding)...].allSatisfy({ $0 == UInt8(padding) }) else {
            plain.zeroize()
            throw .badCiphertext
        }
        // What is dropped is padding, not the secret.
        plain.removeLast(padding)
        return plain
    }

    /// AES-128-CBC over whole blocks, in place. The corresponding C functions are
    /// `gcry_cipher_open`, `gcry_cipher_setkey`, `gcry_cipher_setiv`,
    /// `gcry_cipher_encrypt` or `gcry_cipher_decrypt`, and `gcry_cipher_close`, which
    /// wipes the key schedule.
    private static func crypt(_ bytes: inout [UInt8], key: [UInt8], iv: [UInt8], encrypting: Bool) throws(SecretCryptoError) {
        guard OakleyGroup2.libraryIsReady else { throw .libraryUnavailable }
        var opened: gcry_cipher_hd_t? = nil
        guard gcry_cipher_open(&opened, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0,
              let handle = opened else { throw .libraryUnavailable }
        defer { gcry_cipher_close(handle) }
        // The lengths were checked by the callers: libgcrypt refuses only other ones.
        guard gcry_cipher_setkey(handle, key, key.count) == 0 else { throw .badKey }
        guard gcry_cipher_setiv(handle, iv, iv.count) == 0 else { throw .badParameters }
        let failure = bytes.withUnsafeMutableBytes { buffer in
            encrypting ? gcry_cipher_encrypt(handle, buffer.baseAddress, buffer.count, nil, 0)
                       : gcry_cipher_decrypt(handle, buffer.baseAddress, buffer.count, nil, 0)
        }
        guard failure == 0 else { throw .badCiphertext }
    }
}
