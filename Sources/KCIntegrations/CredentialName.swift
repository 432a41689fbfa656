import Keyrings
import KeyringCore

/// How the credential helpers (git-credential-kc, docker-credential-kc) turn URLs and
/// user names into service and item names, exactly and reversibly: the core's
/// ``CredentialNameCodec`` (the front answers the helpers' `get` with it too), with the
/// full kc's types.
enum CredentialName {
    /// `part` with `%`, `/` (and, `escapingColon`, `:`) as `%XX` escapes.
    static func encode(_ part: some Collection<UInt8>, escapingColon: Bool = false) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(part.count)
        CredentialNameCodec.appendEncoded(part, escapingColon: escapingColon, to: &encoded)
        return encoded
    }

    /// A whole item name for `part`; nil for an empty part or one too long for a name.
    static func item(_ part: some Collection<UInt8>) -> KeyName? {
        CredentialNameCodec.item(part).map { KeyName(bytes: $0) }
    }

    /// The part an encoded name stands for; nil if `name` is not an encoded part.
    static func decode(_ name: some Collection<UInt8>) -> [UInt8]? {
        CredentialNameCodec.decode(name)
    }
}
