import Keyrings
import KeyringCore

/// Checks a service or item name against DESIGN §3 before any kernel call:
/// 1–255 bytes (any bytes: names need not be UTF-8), no `/`, no NUL, not `.` or `..`.
///
/// The names become key descriptions and, through the mount, file names; these rules
/// keep all three views of one item the same.
public enum NameKind: String, Sendable {
    case service
    case item
}

/// Why a name breaks the rules; its description completes "the name ...".
public enum NameProblem: Hashable, Sendable, CustomStringConvertible {
    case empty
    /// Longer than 255 bytes (the file system's and the key description's limit).
    case tooLong(bytes: Int)
    /// `.` or `..`, which a directory listing reserves.
    case reserved(String)
    case containsSlash
    case containsNUL

    public var description: String {
        switch self {
        case .empty: "is empty"
        case .tooLong(let bytes): "is \(bytes) bytes long; the limit is 255"
        case .reserved(let name): "cannot be '\(name)'"
        case .containsSlash: "contains '/'"
        case .containsNUL: "contains a NUL byte"
        }
    }
}

public func validateName(_ name: some KeyNameConvertible, as kind: NameKind) throws(KeychainError) {
    // The rule is the core's (the front checks names by it too); the problem is found
    // only for a name it refuses. Without making an array of the bytes: this is on
    // `kc get`'s path.
    let name = name.keyName
    let byteCount = name.byteCount
    guard byteCount > NameRules.maximumLength
            || !name.withCString({ NameRules.isValid(UnsafeRawBufferPointer(start: $0, count: byteCount)) })
    else { return }
    let problem: NameProblem =
        if byteCount == 0 { .empty }
        else if byteCount > NameRules.maximumLength { .tooLong(bytes: byteCount) }
        else if name.contains(byte: UInt8(ascii: "/")) { .containsSlash }
        else if name.contains(byte: 0) { .containsNUL }
        else { .reserved(name.description) }
    throw KeychainError.invalidName(kind: kind, problem: problem)
}
