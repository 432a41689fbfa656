/// What one call may ask of kc-secretd, checked before any work: far above what a real
/// client stores or asks (Chromium: about 20 attributes of a few dozen bytes per password;
/// secret-tool, git and python keyring: fewer), so that no client can make one call cost
/// the daemon, or the index every daemon reads, more than a bounded amount. Each refusal
/// is `LimitsExceeded` and names the limit.
///
/// The index is loaded whole and saved whole, so it is bounded too
/// (``SecretLimits/indexBytes``): a change that would take it past the bound is refused,
/// and what is saved can always be read back (the vault reads a document of up to
/// 64 MiB, age's overhead included).
enum SecretLimits {
    /// An item's or a collection's label.
    static let labelBytes = 4096
    static let contentTypeBytes = 255
    /// An item's attributes: how many, and their keys and values together. A search
    /// asks for a subset of one item's, so the same bounds hold for it.
    static let attributeCount = 256
    static let attributeBytes = 65536
    /// Object paths in one call (`Unlock`, `Lock`, `GetSecrets`).
    static let pathsPerCall = 10_000
    /// An alias's name (``checkAlias(_:)``).
    static let aliasBytes = 255
    /// A collection's name, made from its label (an object path element too).
    static let collectionNameBytes = 64
    /// The index as saved (before encryption).
    static let indexBytes = 32 << 20

    static func checkItem(attributes: [String: String], label: String, contentType: String) throws(BusError) {
        try checkLabel(label)
        guard contentType.utf8.count <= contentTypeBytes else {
            throw .limitsExceeded("the content type is \(contentType.utf8.count) bytes; kc-secretd keeps at most \(contentTypeBytes)")
        }
        try checkAttributes(attributes, per: "item")
    }

    static func checkLabel(_ label: String) throws(BusError) {
        guard label.utf8.count <= labelBytes else { throw .limitsExceeded("the label is \(label.utf8.count) bytes; kc-secretd keeps at most \(labelBytes)") }
    }

    /// The attributes of an item, or those a search asks for (`per: "search"`).
    static func checkAttributes(_ attributes: [String: String], per what: String) throws(BusError) {
        guard attributes.count <= attributeCount else {
            throw .limitsExceeded("\(attributes.count) attributes; kc-secretd keeps at most \(attributeCount) per \(what)")
        }
        let size = attributes.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= attributeBytes else {
            throw .limitsExceeded("the attributes are \(size) bytes; kc-secretd keeps at most \(attributeBytes) per \(what)")
        }
    }

    /// For the object paths one call names (`Unlock`, `Lock`, `GetSecrets`): checked by
    /// the method before it looks at any of them.
    static func checkPaths(_ count: Int) throws(BusError) {
        guard count <= pathsPerCall else {
            throw .limitsExceeded("\(count) object paths in one call; kc-secretd takes at most \(pathsPerCall) (ask in several calls)")
        }
    }

    /// An alias names an object (`/org/freedesktop/secrets/aliases/NAME`) and appears in
    /// the introspection XML: 1 to 255 bytes with no `/`, no control character and none
    /// of XML's `<`, `>`, `&`, `"`, `'`. (Clients use `default`, `session`, `login`; a
    /// stricter rule, path-element characters only, would refuse names such as
    /// `my-alias` that clients have stored.)
    static func checkAlias(_ name: String) throws(BusError) {
        let refused: Set<UInt8> = Set("/<>&\"'".utf8)
        guard !name.isEmpty, name.utf8.count <= aliasBytes,
              name.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7f && !refused.contains($0) }) else {
            throw .invalidArguments("an alias is 1 to \(aliasBytes) bytes without '/', control characters, or any of < > & \" ' (it names the object /org/freedesktop/secrets/aliases/NAME)")
        }
    }

    /// An index of `size` bytes may be saved.
    static func checkIndex(size: Int) throws(BusError) {
        guard size <= indexBytes else {
            throw .limitsExceeded("the Secret Service's index would be \(size) bytes; kc-secretd keeps at most \(indexBytes): delete items or collections first")
        }
    }
}
