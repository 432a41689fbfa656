import Keyrings

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// How kc's JSON (`--json` output and export archives) carries a name. JSON strings are
// Unicode, and a name is bytes: a name that is valid UTF-8 is a plain string, and one
// that is not is written twice, as text for people (each byte that is not UTF-8 as
// U+FFFD) and exactly, in base64, in a sibling field named with the suffix `Base64`
// (`name` and `nameBase64`). A reader takes the base64 field when it is there.

extension KeyName {
    /// The name as JSON text: itself if it is UTF-8, else with U+FFFD for each byte
    /// that is not.
    public var jsonText: String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The exact bytes in base64, for a name that is not UTF-8 only; nil for one that is.
    public var jsonBase64: String? {
        text == nil ? Data(bytes).base64EncodedString() : nil
    }

    /// A name read back from JSON: from `base64` when present, else from `text`.
    /// Nil if `base64` is not base64.
    public init?(jsonText text: String, base64: String?) {
        guard let base64 else {
            self.init(text)
            return
        }
        guard let data = Data(base64Encoded: base64) else { return nil }
        self.init(bytes: data)
    }
}

extension KeyedEncodingContainer {
    /// Encodes `name` under `key`, and under `base64Key` too when it is not UTF-8
    /// (see ``KeyName/jsonBase64``).
    public mutating func encode(_ name: KeyName, forKey key: Key, base64Key: Key) throws {
        try encode(name.jsonText, forKey: key)
        try encodeIfPresent(name.jsonBase64, forKey: base64Key)
    }
}
