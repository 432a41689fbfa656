import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The 128-bit key that encrypts one file: fresh for every file, wrapped once per
/// recipient stanza, and the root of the header's MAC key and the payload key.
///
/// Held in a `SymmetricKey`, whose storage swift-crypto zeroes when it is freed.
struct FileKey: Sendable {
    static let byteCount = 16
    /// A wrapped file key: the 16-byte key and ChaCha20-Poly1305's 16-byte tag.
    static let wrappedByteCount = byteCount + 16

    let key: SymmetricKey

    /// A new random file key (swift-crypto draws it from the system CSPRNG).
    static func generate() -> FileKey {
        FileKey(key: SymmetricKey(size: .bits128))
    }

    private init(key: SymmetricKey) {
        self.key = key
    }

    /// The key that authenticates the header: HKDF-SHA-256(file key, no salt, "header").
    var headerMACKey: SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array("header".utf8), outputByteCount: 32)
    }

    /// The key that encrypts the payload: HKDF-SHA-256(file key, nonce, "payload").
    func payloadKey(nonce: some DataProtocol) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, salt: nonce, info: Array("payload".utf8), outputByteCount: 32)
    }

    /// The file key encrypted for a stanza body: ChaCha20-Poly1305 under `wrapKey`
    /// with the all-zero nonce (safe because every wrap key is used exactly once).
    func wrapped(with wrapKey: SymmetricKey) throws(AgeError) -> [UInt8] {
        do {
            let sealed = try key.withUnsafeBytes { fileKeyBytes in
                try ChaChaPoly.seal(fileKeyBytes, using: wrapKey, nonce: Self.zeroNonce())
            }
            var body = [UInt8](sealed.ciphertext)
            body.append(contentsOf: sealed.tag)
            return body
        } catch {
            throw .cryptographicFailure("ChaCha20-Poly1305 could not wrap the file key")
        }
    }

    /// Decrypts a stanza body with `wrapKey`; nil when it does not authenticate (the
    /// stanza was made for another key or passphrase). The body's length must already
    /// have been checked to be `wrappedByteCount`, so that a wrong length is reported
    /// as a malformed stanza and not tried (age's defence against partitioning oracles).
    init?(unwrapping body: [UInt8], with wrapKey: SymmetricKey) {
        precondition(body.count == Self.wrappedByteCount, "stanza parsers check the body length")
        guard let sealedBox = try? ChaChaPoly.SealedBox(
            nonce: Self.zeroNonce(), ciphertext: body[..<Self.byteCount], tag: body[Self.byteCount...]
        ),
            var plaintext = try? ChaChaPoly.open(sealedBox, using: wrapKey)
        else { return nil }
        defer { plaintext.zeroize() }
        key = SymmetricKey(data: plaintext)
    }

    private static func zeroNonce() throws -> ChaChaPoly.Nonce {
        try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12))
    }
}
