/// Why a Secret Service session could not be keyed, or a secret not be sealed or opened
/// (the `dh-ietf1024-sha256-aes128-cbc-pkcs7` transport).
///
/// No case carries key or secret bytes: a client sees only which part of its request
/// was wrong.
public enum SecretCryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The client's Diffie-Hellman public key is not a number in 2 ... p−2 of the
    /// 1024-bit group (empty, 0, 1, p−1, p or above, or longer than 128 bytes once
    /// leading zeros are dropped).
    case invalidPublicKey
    /// An encrypted secret is not whole AES blocks, or its PKCS#7 padding is wrong once
    /// decrypted: it was sealed with another session's key or damaged on the way.
    case badCiphertext
    /// A secret's parameters (its AES-CBC initialisation vector) are not 16 bytes.
    case badParameters
    /// The AES key is not the 16 bytes a session derives: a programming error in the
    /// caller, reported rather than trapped so that the daemon keeps running.
    case badKey
    /// The kernel's random number generator refused to give bytes. The corresponding
    /// C function is `getentropy`.
    case randomFailed
    case libraryUnavailable

    /// One line: the cause, then what to do.
    public var description: String {
        switch self {
        case .invalidPublicKey:
            return "invalid Diffie-Hellman public key: it must be a number from 2 to p-2 of the 1024-bit group (RFC 2409 group 2); open the session again"
        case .badCiphertext:
            return "the encrypted secret does not decrypt: not whole AES blocks or bad padding; encrypt it with this session's key"
        case .badParameters:
            return "bad secret parameters: the AES-CBC initialisation vector must be 16 bytes"
        case .badKey:
            return "bad session key: an AES-128 key is 16 bytes"
        case .libraryUnavailable:
            return "libgcrypt is older than the one kc-secretd was built with, so no encrypted session can be made; update libgcrypt20, or use a plain session"
        case .randomFailed:
            return "the system random number generator failed (getentropy); try again"
        }
    }
}
