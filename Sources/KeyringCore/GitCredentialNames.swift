/// How `git-credential-kc` names a remote's service and a user's items, and reads git's
/// `key=value` lines: rules of both programs (the full kc's GitCredentialHelper and the
/// front's answer to `get`).
public enum GitCredentialNames {
    /// The sibling item that holds a user's OAuth refresh token: `USER%oauth_refresh_token`.
    public static let refreshSuffix: StaticString = "%oauth_refresh_token"

    /// `git:PROTOCOL:HOST[%2FPATH]`, each part encoded (and `:` in the protocol); nil when
    /// git did not say which remote (no protocol, or neither host nor path), the host
    /// holds a `/`, or the name would be too long. No real host holds a `/` (it could only
    /// come from a `%2F` in a URL), and its name would be that of the host before the `/`
    /// with a path: `host=a.com/x` must not read what was stored for `host=a.com` and `path=x`.
    public static func service(protocolName: [UInt8]?, host: [UInt8]?, path: [UInt8]?) -> [UInt8]? {
        guard let protocolName, !protocolName.isEmpty else { return nil }
        let host = host ?? []
        guard !host.isEmpty || path != nil, !host.contains(UInt8(ascii: "/")) else { return nil }
        var name: [UInt8] = Array(staticBytes("git:"))
        CredentialNameCodec.appendEncoded(protocolName, escapingColon: true, to: &name)
        name.append(UInt8(ascii: ":"))
        CredentialNameCodec.appendEncoded(host, to: &name)
        if let path {
            name.append(contentsOf: staticBytes("%2F"))
            CredentialNameCodec.appendEncoded(path, to: &name)
        }
        return name.count <= NameRules.maximumLength ? name : nil
    }

    /// The items of a user: the password's and the refresh token's; nil for a user whose
    /// names would be empty or too long.
    public static func items(forUser user: [UInt8]) -> (password: [UInt8], refreshToken: [UInt8])? {
        guard let password = CredentialNameCodec.item(user) else { return nil }
        var refreshToken = password
        refreshToken.append(contentsOf: staticBytes(refreshSuffix))
        guard refreshToken.count <= NameRules.maximumLength else { return nil }
        return (password, refreshToken)
    }

    /// The user an item of this helper's belongs to (its password or its refresh token);
    /// nil for a name this helper did not make (one that does not encode back exactly).
    public static func user(ofItem name: [UInt8]) -> [UInt8]? {
        var itemName = name
        let suffix = staticBytes(refreshSuffix)
        if itemName.count > suffix.count, itemName.suffix(suffix.count).elementsEqual(suffix) {
            itemName.removeLast(suffix.count)
        }
        guard let user = CredentialNameCodec.decode(itemName), CredentialNameCodec.item(user) == itemName else { return nil }
        return user
    }

    /// Why git's input cannot be read.
    public enum LineError: Error, Equatable {
        /// Line `line` (from 1) holds a NUL byte.
        case nul(line: Int)
        /// Line `line` has no `=`.
        case notKeyValue(line: Int)
    }

    /// Calls `body` with the key and value of each `key=value` line of `input` (a final
    /// carriage return dropped, empty lines skipped), in order, until it returns false.
    /// The first line that is not one stops the reading with its error.
    public static func forEachAttribute(in input: UnsafeRawBufferPointer,
                                        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool) -> LineError? {
        var lineStart = 0, lineNumber = 0
        while lineStart <= input.count {
            lineNumber += 1
            var lineEnd = lineStart
            while lineEnd < input.count && input[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            defer { lineStart = lineEnd + 1 }
            var end = lineEnd
            if end > lineStart && input[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            if end == lineStart { continue }
            let line = UnsafeRawBufferPointer(rebasing: input[lineStart..<end])
            if line.contains(0) { return .nul(line: lineNumber) }
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { return .notKeyValue(line: lineNumber) }
            if !body(UnsafeRawBufferPointer(rebasing: line[..<equals]), UnsafeRawBufferPointer(rebasing: line[(equals + 1)...])) {
                return nil
            }
        }
        return nil
    }
}
