/// Checks a service or item name against DESIGN §3 before any kernel call:
/// 1–255 bytes of UTF-8, no `/`, no NUL, not `.` or `..`.
///
/// The names become key descriptions and, through the mount, file names; these rules
/// keep all three views of one item the same.
public enum NameKind: String, Sendable {
    case service
    case item
}

public func validateName(_ name: String, as kind: NameKind) throws(KeychainError) {
    let byteCount = name.utf8.count
    let problem: String? =
        if byteCount == 0 { "is empty" }
        else if byteCount > 255 { "is \(byteCount) bytes long; the limit is 255" }
        else if name == "." || name == ".." { "cannot be '\(name)'" }
        else if name.utf8.contains(UInt8(ascii: "/")) { "contains '/'" }
        else if name.utf8.contains(0) { "contains a NUL byte" }
        else { nil }
    if let problem {
        throw KeychainError.invalidName(kind: kind, problem: problem)
    }
}
