import Crypto
import CryptoExtras

/// A passphrase (scrypt) recipient stanza:
///
///     -> scrypt <base64 salt, 16 bytes> <logN>
///     <base64 of the wrapped file key, 32 bytes>
///
/// wrap key = scrypt(N = 2^logN, r = 8, p = 1, dkLen = 32,
///                   salt = "age-encryption.org/v1/scrypt" || salt, password = passphrase)
///
/// It must be the only stanza of its header (`AgeHeader` checks that).
struct AgeScryptStanza: Sendable {
    static let type = "scrypt"
    static let saltLabel: [UInt8] = Array("age-encryption.org/v1/scrypt".utf8)
    static let saltByteCount = 16
    /// scrypt's block size r and parallelism p, fixed by the age specification.
    static let blockSize = 8
    static let parallelism = 1
    /// The largest logN scrypt in swift-crypto (BoringSSL) accepts at all: N ≤ 2^32.
    static let largestComputableLogN = 32

    /// The random salt, without the label.
    var salt: [UInt8]
    /// The base-2 logarithm of the work factor N.
    var logN: Int
    /// The file key, encrypted under the wrap key.
    var wrappedFileKey: [UInt8]

    /// Checks an `scrypt` stanza's shape: two arguments, the canonical base64 of a
    /// 16-byte salt and a decimal logN without leading zeros (`^[1-9][0-9]*$`), and a
    /// 32-byte body. Anything else is a malformed header.
    init(validating stanza: AgeStanza) throws(AgeError) {
        precondition(stanza.type == Self.type)
        guard stanza.arguments.count == 2 else {
            throw .malformedHeader("an scrypt stanza has \(stanza.arguments.count) arguments after its type, not 2")
        }
        guard let salt = CanonicalBase64.decode(Array(stanza.arguments[0].utf8)[...]),
              salt.count == Self.saltByteCount
        else {
            throw .malformedHeader("an scrypt stanza's salt is not the canonical base64 of 16 bytes")
        }
        let digits = Array(stanza.arguments[1].utf8)
        // Int(_:) alone would also take "+10"; the specification wants plain digits.
        guard let first = digits.first, (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(first),
              digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let logN = Int(stanza.arguments[1])
        else {
            throw .malformedHeader("an scrypt stanza's work factor is not a decimal number from 1 without leading zeros")
        }
        guard stanza.body.count == FileKey.wrappedByteCount else {
            throw .malformedHeader("an scrypt stanza's body is \(stanza.body.count) bytes, not 32")
        }
        self.salt = salt
        self.logN = logN
        self.wrappedFileKey = stanza.body
    }

    /// Wraps `fileKey` under `passphrase` with a fresh salt and work factor 2^`logN`.
    static func wrap(_ fileKey: FileKey, passphrase: [UInt8], logN: Int) throws(AgeError) -> AgeStanza {
        var salt = [UInt8](repeating: 0, count: saltByteCount)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        let wrapKey = try deriveWrapKey(passphrase: passphrase, salt: salt, logN: logN)
        let body = try fileKey.wrapped(with: wrapKey)
        return AgeStanza(
            type: type,
            arguments: [String(decoding: CanonicalBase64.encode(salt), as: UTF8.self), String(logN)],
            body: body
        )
    }

    /// The file key if `passphrase` is the one this stanza was made with; nil if not.
    /// A work factor above `maximumLogN` is refused before any work is done, since
    /// scrypt at a large logN costs minutes and gigabytes.
    func unwrap(passphrase: [UInt8], maximumLogN: Int) throws(AgeError) -> FileKey? {
        let maximum = min(maximumLogN, Self.largestComputableLogN)
        guard logN <= maximum else {
            throw .workFactorTooHigh(logN: logN, maximum: maximum)
        }
        let wrapKey = try Self.deriveWrapKey(passphrase: passphrase, salt: salt, logN: logN)
        return FileKey(unwrapping: wrappedFileKey, with: wrapKey)
    }

    private static func deriveWrapKey(passphrase: [UInt8], salt: [UInt8], logN: Int) throws(AgeError) -> SymmetricKey {
        precondition((1...largestComputableLogN).contains(logN), "callers check the work factor")
        let rounds = 1 << logN
        // scrypt's memory is 128·r·N bytes for its table plus a few blocks; swift-crypto
        // adds a page to its own estimate, this leaves the same room explicitly.
        let memory = 128 * blockSize * (rounds + parallelism + 2) + 65536
        do {
            return try KDF.Scrypt.deriveKey(
                from: passphrase, salt: saltLabel + salt, outputByteCount: 32,
                rounds: rounds, blockSize: blockSize, parallelism: parallelism, maxMemory: memory
            )
        } catch {
            throw .cryptographicFailure("scrypt with work factor 2^\(logN) failed (not enough memory?)")
        }
    }
}
