/// Why an age file could not be written or read, or a key not parsed.
///
/// No case ever carries secret material: reasons name what was wrong with the
/// structure (a line, an argument, a length), never the bytes that held a key.
public enum AgeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The header breaks the age v1 syntax (version line, stanzas, MAC line), or a
    /// stanza of a known type (X25519, scrypt) is malformed, or an X25519 share
    /// gives the forbidden all-zero shared secret.
    case malformedHeader(String)
    /// No stanza could be unwrapped by the identities or passphrase given: a wrong
    /// key, a wrong passphrase, or a file made for another kind of recipient.
    case noMatchingIdentity
    /// A stanza unwrapped, but the header's MAC does not match: the header was
    /// changed after it was written.
    case headerMACMismatch
    /// The encrypted payload after the header is truncated, fails its
    /// authentication, or has bytes after its final chunk.
    case malformedPayload(String)
    /// The scrypt stanza asks for 2^`logN` iterations, more than the caller's
    /// `maximum` allows.
    case workFactorTooHigh(logN: Int, maximum: Int)
    /// An `AGE-SECRET-KEY-1…` identity or `age1…` recipient could not be parsed.
    case invalidKey(String)
    /// Encryption was asked for with an empty recipient list.
    case noRecipients
    /// An empty passphrase: age does not encrypt or decrypt with one.
    case emptyPassphrase
    /// A scrypt work factor below 1 was asked for when encrypting.
    case invalidWorkFactor(logN: Int)
    /// swift-crypto refused an operation that cannot fail on valid input (for
    /// example scrypt could not allocate its memory).
    case cryptographicFailure(String)

    /// One line: the cause, then what to do.
    public var description: String {
        switch self {
        case .malformedHeader(let reason):
            return "not a valid age file: \(reason); the file is damaged or not an age v1 file"
        case .noMatchingIdentity:
            return "no identity matched: the file was not encrypted to these keys, or the passphrase is wrong"
        case .headerMACMismatch:
            return "the age header's MAC does not match: the header was modified after encryption; restore the file from a copy"
        case .malformedPayload(let reason):
            return "the encrypted payload is damaged: \(reason); restore the file from a copy"
        case .workFactorTooHigh(let logN, let maximum):
            return "scrypt work factor 2^\(logN) is above the allowed 2^\(maximum); raise the maximum only for a file you trust"
        case .invalidKey(let reason):
            return "invalid age key: \(reason)"
        case .noRecipients:
            return "no recipients: name at least one age1… recipient to encrypt to"
        case .emptyPassphrase:
            return "empty passphrase: age needs a passphrase of at least one byte"
        case .invalidWorkFactor(let logN):
            return "invalid scrypt work factor 2^\(logN): use a logN of at least 1 (age's default is 18)"
        case .cryptographicFailure(let reason):
            return "cryptographic operation failed: \(reason)"
        }
    }
}
