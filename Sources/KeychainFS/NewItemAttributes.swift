public import KernelKeychain

/// What a file that is not yet an item will be when it is first stored: its level,
/// device-only flag and deadline. Extended attributes set on such a file (`cp -a`,
/// `mv` across filesystems, an editor copying them to its new file) change this, and
/// apply when the file is stored.
public struct NewItemAttributes: Hashable, Sendable {
    public var accessibility: Accessibility
    public var deadline: Deadline?

    public init(accessibility: Accessibility, deadline: Deadline? = nil) {
        self.accessibility = accessibility
        self.deadline = deadline
    }

    /// The text of `user.kc.access`, `user.kc.this-device-only` or `user.kc.timeout`.
    func value(of attribute: String) throws(FilesystemError) -> String {
        switch attribute {
        case KeychainFilesystem.accessAttribute: return accessibility.level.rawValue
        case KeychainFilesystem.deviceOnlyAttribute: return accessibility.isThisDeviceOnly ? "1" : "0"
        case KeychainFilesystem.timeoutAttribute: return String(deadline?.secondsLeft ?? 0)
        default: throw FilesystemError(.noData)
        }
    }

    /// Applies one attribute's text (a trailing newline from `echo` is ignored).
    /// EINVAL for a value the attribute cannot take; EPERM for `user.kc.serial`.
    mutating func set(_ attribute: String, to text: String) throws(FilesystemError) {
        let value = text.trimmingTrailingNewlines
        switch attribute {
        case KeychainFilesystem.accessAttribute:
            guard let level = Accessibility.Level(rawValue: value) else { throw FilesystemError(.invalidArgument) }
            accessibility = Accessibility(level: level, thisDeviceOnly: accessibility.isThisDeviceOnly)
        case KeychainFilesystem.deviceOnlyAttribute:
            guard value == "1" || value == "0" else { throw FilesystemError(.invalidArgument) }
            accessibility = Accessibility(level: accessibility.level, thisDeviceOnly: value == "1")
        case KeychainFilesystem.timeoutAttribute:
            guard let seconds = UInt32(value) else { throw FilesystemError(.invalidArgument) }
            // Copying the value it shows (cp -a, mv) must not move the deadline.
            if let deadline, deadline.secondsLeft == UInt64(seconds) { return }
            deadline = seconds == 0 ? nil : .fromNow(seconds: UInt64(seconds))
        case KeychainFilesystem.serialAttribute:
            throw FilesystemError(.notPermitted)
        default:
            throw FilesystemError(.notSupported)
        }
    }
}

/// Attributes of items that were just removed or renamed away, by the name they had,
/// for a few seconds: an editor that saves by renaming the original to a backup (vim's
/// default) or removing it, then creating a new file under the name, keeps the item's
/// level, device-only flag and deadline. Holds no value.
final class RecentlyReplaced: Sendable {
    /// How long a name's attributes wait for a new file.
    static let window: Int64 = 30

    private struct Entry {
        var attributes: NewItemAttributes
        var recorded: Int64
    }

    private let entries = Locked([Node: Entry]())

    func remember(_ node: Node, _ item: KeychainItem) {
        guard let accessibility = item.accessibility else { return }
        let now = Deadline.now
        entries.withLock { entries in
            entries = entries.filter { now - $0.value.recorded < Self.window }
            entries[node] = Entry(attributes: NewItemAttributes(accessibility: accessibility, deadline: item.deadline), recorded: now)
        }
    }

    func take(_ node: Node) -> NewItemAttributes? {
        let now = Deadline.now
        return entries.withLock { entries in
            guard let entry = entries.removeValue(forKey: node), now - entry.recorded < Self.window else { return nil }
            return entry.attributes
        }
    }
}
