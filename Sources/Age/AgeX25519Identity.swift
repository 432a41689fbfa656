import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An age X25519 identity: the secret key that decrypts files encrypted to its
/// ``recipient``, written as upper-case Bech32 with the human-readable part
/// `AGE-SECRET-KEY-` (`AGE-SECRET-KEY-1…`), as `age-keygen` writes it.
///
/// The key lives in swift-crypto's storage, which is zeroed when freed. ``encoded``
/// and ``secretKey`` hand out copies: a `String` cannot be zeroed, so prefer
/// ``secretKey`` (and zero it) where the text is not needed.
public struct AgeX25519Identity: Sendable {
    static let humanReadablePart: [UInt8] = Array("AGE-SECRET-KEY-".utf8)

    let privateKey: Curve25519.KeyAgreement.PrivateKey

    /// The public recipient that files for this identity are encrypted to.
    public let recipient: AgeX25519Recipient

    /// A new identity from the system's CSPRNG.
    public static func generate() -> AgeX25519Identity {
        AgeX25519Identity(privateKey: Curve25519.KeyAgreement.PrivateKey())
    }

    /// Parses an `AGE-SECRET-KEY-1…` line. Lower and mixed case are refused, as
    /// age refuses them. The error never repeats the text.
    public init(parsing text: some StringProtocol) throws(AgeError) {
        var bytes = Array(text.utf8)
        defer { bytes.zeroize() }
        try self.init(parsingASCII: bytes[...])
    }

    /// Parses an `AGE-SECRET-KEY-1…` identity from ASCII bytes.
    init(parsingASCII text: ArraySlice<UInt8>) throws(AgeError) {
        var (humanReadablePart, data) = try Bech32.decode(text)
        defer { data.zeroize() }
        guard humanReadablePart == Self.humanReadablePart else {
            throw .invalidKey("not an AGE-SECRET-KEY-1… identity (it must be upper case)")
        }
        try self.init(secretKey: data)
    }

    /// An identity from its 32 raw secret bytes (the caller zeroes its copy).
    public init(secretKey: [UInt8]) throws(AgeError) {
        guard secretKey.count == 32 else {
            throw .invalidKey("an X25519 secret key is 32 bytes, not \(secretKey.count)")
        }
        do {
            self.init(privateKey: try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: secretKey))
        } catch {
            throw .invalidKey("not a Curve25519 secret key")
        }
    }

    private init(privateKey: Curve25519.KeyAgreement.PrivateKey) {
        self.privateKey = privateKey
        self.recipient = AgeX25519Recipient(publicKey: privateKey.publicKey)
    }

    /// The 32 raw secret bytes; the caller zeroes its copy when done.
    public var secretKey: [UInt8] {
        // rawRepresentation shares swift-crypto's own key storage (zeroed when the
        // key is freed): it must not be zeroed here, or the identity would be too.
        [UInt8](privateKey.rawRepresentation)
    }

    /// The `AGE-SECRET-KEY-1…` text (upper case), as an identity file holds it.
    public var encoded: String {
        var secret = secretKey
        defer { secret.zeroize() }
        var text = Bech32.encode(humanReadablePart: Array("age-secret-key-".utf8), data: secret)
        defer { text.zeroize() }
        for index in text.indices where (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(text[index]) {
            text[index] -= 0x20
        }
        return String(decoding: text, as: UTF8.self)
    }
}
