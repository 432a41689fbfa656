import Crypto

/// An X25519 recipient stanza:
///
///     -> X25519 <base64 ephemeral share>
///     <base64 of the wrapped file key, 32 bytes>
///
/// wrap key = HKDF-SHA-256(X25519(ephemeral secret, recipient),
///                         salt: ephemeral share || recipient, info: "age-encryption.org/v1/X25519")
struct AgeX25519Stanza: Sendable {
    static let type = "X25519"
    static let info: [UInt8] = Array("age-encryption.org/v1/X25519".utf8)
    static let shareByteCount = 32

    /// The sender's ephemeral public key.
    var ephemeralShare: [UInt8]
    /// The file key, encrypted under the wrap key.
    var wrappedFileKey: [UInt8]

    /// Checks an `X25519` stanza's shape: exactly one argument, the canonical base64
    /// of 32 bytes, and a 32-byte body. Anything else is a malformed header, not a
    /// stanza for someone else.
    init(validating stanza: AgeStanza) throws(AgeError) {
        precondition(stanza.type == Self.type)
        guard stanza.arguments.count == 1 else {
            throw .malformedHeader("an X25519 stanza has \(stanza.arguments.count) arguments after its type, not 1")
        }
        guard let share = CanonicalBase64.decode(Array(stanza.arguments[0].utf8)[...]),
              share.count == Self.shareByteCount
        else {
            throw .malformedHeader("an X25519 stanza's share is not the canonical base64 of 32 bytes")
        }
        guard stanza.body.count == FileKey.wrappedByteCount else {
            throw .malformedHeader("an X25519 stanza's body is \(stanza.body.count) bytes, not 32")
        }
        ephemeralShare = share
        wrappedFileKey = stanza.body
    }

    /// Wraps `fileKey` for `recipient` with a fresh ephemeral key.
    static func wrap(_ fileKey: FileKey, to recipient: AgeX25519Recipient) throws(AgeError) -> AgeStanza {
        let ephemeralSecret = Curve25519.KeyAgreement.PrivateKey()
        let share = [UInt8](ephemeralSecret.publicKey.rawRepresentation)
        let sharedSecret: SharedSecret
        do {
            sharedSecret = try ephemeralSecret.sharedSecretFromKeyAgreement(with: recipient.publicKey)
        } catch {
            throw .cryptographicFailure("X25519 key agreement failed")
        }
        // Only a low-order recipient key gives zero; a recipient parsed from age1…
        // text can be one, and then anyone could read the file.
        guard !isAllZero(sharedSecret) else {
            throw .invalidKey("the recipient is a low-order point, which no identity can own")
        }
        let wrapKey = deriveWrapKey(sharedSecret, share: share, recipient: recipient.publicKeyBytes)
        let body = try fileKey.wrapped(with: wrapKey)
        return AgeStanza(type: type, arguments: [String(decoding: CanonicalBase64.encode(share), as: UTF8.self)], body: body)
    }

    /// The file key, if this stanza was made for `identity`; nil if it was not.
    /// Throws for a share that gives the all-zero shared secret (a low-order point),
    /// which the age specification says must abort decryption.
    func unwrap(with identity: AgeX25519Identity) throws(AgeError) -> FileKey? {
        let sharedSecret: SharedSecret
        do {
            let share = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: ephemeralShare)
            sharedSecret = try identity.privateKey.sharedSecretFromKeyAgreement(with: share)
        } catch {
            throw .cryptographicFailure("X25519 key agreement failed")
        }
        guard !Self.isAllZero(sharedSecret) else {
            throw .malformedHeader("an X25519 stanza's share is a low-order point (all-zero shared secret)")
        }
        let wrapKey = Self.deriveWrapKey(sharedSecret, share: ephemeralShare, recipient: identity.recipient.publicKeyBytes)
        return FileKey(unwrapping: wrappedFileKey, with: wrapKey)
    }

    private static func deriveWrapKey(_ sharedSecret: SharedSecret, share: [UInt8], recipient: [UInt8]) -> SymmetricKey {
        sharedSecret.hkdfDerivedSymmetricKey(using: SHA256.self, salt: share + recipient, sharedInfo: info, outputByteCount: 32)
    }

    /// Whether every byte is zero, read without an early exit.
    private static func isAllZero(_ sharedSecret: SharedSecret) -> Bool {
        sharedSecret.withUnsafeBytes { bytes in bytes.reduce(0, |) == 0 }
    }
}
