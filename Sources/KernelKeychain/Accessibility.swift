/// When an item can be read, in the terms of Apple's keychain, mapped onto the
/// lifetimes of Linux's keyrings (DESIGN §2).
public enum Accessibility: Sendable, Hashable, CaseIterable {
    /// Session keyring (`@s`): gone at logout, not seen by other login sessions. The default.
    case whenUnlocked
    /// User keyring (`@u`): until reboot (the kernel keeps it after the uid's last process); seen by all its sessions.
    case afterFirstUnlock
    /// Persistent keyring: survives logout; the kernel drops it after
    /// `kernel.keys.persistent_keyring_expiry` seconds unused (3 days by default) and at reboot.
    case always
    /// As ``whenUnlocked``, and never written out by an export.
    case whenUnlockedThisDeviceOnly
    /// As ``afterFirstUnlock``, and never written out by an export.
    case afterFirstUnlockThisDeviceOnly
    /// As ``always``, and never written out by an export.
    case alwaysThisDeviceOnly

    /// The three lifetimes, without the device-only marking.
    public enum Level: String, Sendable, Hashable, CaseIterable {
        case whenUnlocked = "when-unlocked"
        case afterFirstUnlock = "after-first-unlock"
        case always = "always"
    }

    public init(level: Level, thisDeviceOnly: Bool) {
        switch (level, thisDeviceOnly) {
        case (.whenUnlocked, false): self = .whenUnlocked
        case (.afterFirstUnlock, false): self = .afterFirstUnlock
        case (.always, false): self = .always
        case (.whenUnlocked, true): self = .whenUnlockedThisDeviceOnly
        case (.afterFirstUnlock, true): self = .afterFirstUnlockThisDeviceOnly
        case (.always, true): self = .alwaysThisDeviceOnly
        }
    }

    public var level: Level {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly: .whenUnlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: .always
        }
    }

    /// Device-only items are never exported: the Linux meaning of "not backed up or migrated".
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: false
        case .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly: true
        }
    }

    /// The CLI's spelling: `when-unlocked`, `after-first-unlock`, `always`, with
    /// `+this-device-only` appended for device-only items.
    public var name: String {
        isThisDeviceOnly ? level.rawValue + "+this-device-only" : level.rawValue
    }

    internal var anchor: Anchor {
        switch level {
        case .whenUnlocked: .session
        case .afterFirstUnlock: .user
        case .always: .persistent
        }
    }

    internal var marker: ServiceMarker { isThisDeviceOnly ? .deviceOnly : .portable }

    internal init(anchor: Anchor, marker: ServiceMarker) {
        let level: Level = switch anchor {
        case .session: .whenUnlocked
        case .user: .afterFirstUnlock
        case .persistent: .always
        }
        self.init(level: level, thisDeviceOnly: marker == .deviceOnly)
    }
}
