import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An age X25519 recipient: the public key a file is encrypted to, written as
/// Bech32 with the human-readable part `age` (`age1…`, lower case).
public struct AgeX25519Recipient: Sendable, Hashable, CustomStringConvertible {
    static let humanReadablePart: [UInt8] = Array("age".utf8)

    /// The Curve25519 public key.
    let publicKey: Curve25519.KeyAgreement.PublicKey
    /// Its 32 raw bytes (kept beside the key: the HKDF salt and equality use them).
    let publicKeyBytes: [UInt8]

    /// Parses an `age1…` recipient, as `age-keygen` prints it and `age -r` takes it.
    /// Upper case (`AGE1…`) is refused, as age refuses it.
    public init(parsing text: some StringProtocol) throws(AgeError) {
        let (humanReadablePart, data) = try Bech32.decode(Array(text.utf8)[...])
        guard humanReadablePart == Self.humanReadablePart else {
            throw .invalidKey("not an age1… X25519 recipient")
        }
        guard data.count == 32 else {
            throw .invalidKey("an age1… recipient must hold 32 bytes, this one holds \(data.count)")
        }
        try self.init(publicKeyBytes: data)
    }

    init(publicKeyBytes: [UInt8]) throws(AgeError) {
        do {
            publicKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKeyBytes)
        } catch {
            throw .invalidKey("not a Curve25519 public key")
        }
        self.publicKeyBytes = publicKeyBytes
    }

    init(publicKey: Curve25519.KeyAgreement.PublicKey) {
        self.publicKey = publicKey
        self.publicKeyBytes = [UInt8](publicKey.rawRepresentation)
    }

    /// The `age1…` text of this recipient.
    public var encoded: String {
        String(decoding: Bech32.encode(humanReadablePart: Self.humanReadablePart, data: publicKeyBytes), as: UTF8.self)
    }

    /// The `age1…` text, so a recipient prints as the user would type it.
    public var description: String { encoded }

    /// Two recipients are equal when their public keys are.
    public static func == (left: AgeX25519Recipient, right: AgeX25519Recipient) -> Bool {
        left.publicKeyBytes == right.publicKeyBytes
    }

    /// Hashes the public key's bytes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(publicKeyBytes)
    }
}
