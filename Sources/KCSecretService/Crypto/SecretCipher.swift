import Crypto
import CryptoExtras
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The secrets of a `dh-ietf1024-sha256-aes128-cbc-pkcs7` session: AES-128-CBC with
/// PKCS#7 padding under the session's key, the 16-byte initialisation vector sent as
/// the secret's parameters.
///
/// There is no MAC: the transport protects a secret on the bus against a passive
/// observer, and the padding check is the only sign of a wrong key. The decrypted
/// secret this module holds is zeroed; swift-crypto's own working copies (the padded
/// plaintext) are beyond its reach.
public enum SecretCipher {
    /// Bytes in an AES block, an AES-128 key and an initialisation vector.
    private static let blockSize = 16

    /// (iv, ciphertext) with a fresh IV from the system CSPRNG.
    public static func encrypt(_ plain: [UInt8], key: [UInt8]) throws(SecretCryptoError) -> (parameters: [UInt8], value: [UInt8]) {
        guard key.count == blockSize else { throw .badKey }
        let iv = try SystemEntropy.bytes(count: blockSize)
        do {
            let value = try AES._CBC.encrypt(plain, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: iv))
            return (iv, Array(value))
        } catch {
            // swift-crypto refuses only a key or IV of the wrong length, checked above.
            throw .badKey
        }
    }

    /// Refuses wrong IV length, ciphertext not a multiple of 16, bad padding.
    public static func decrypt(_ value: [UInt8], parameters: [UInt8], key: [UInt8]) throws(SecretCryptoError) -> [UInt8] {
        guard key.count == blockSize else { throw .badKey }
        guard parameters.count == blockSize else { throw .badParameters }
        guard !value.isEmpty, value.count % blockSize == 0 else { throw .badCiphertext }
        var plain: Data
        do {
            plain = try AES._CBC.decrypt(value, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: parameters))
        } catch {
            // Lengths were checked above: what remains is padding that is not PKCS#7.
            throw .badCiphertext
        }
        defer { plain.zeroize() }
        return Array(plain)
    }
}
