import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One finding of `kc doctor`.
public struct DiagnosticCheck: Sendable, Hashable {
    public enum Status: String, Sendable { case ok, warn, fail }
    public var name: String
    public var status: Status
    public var detail: String

    public init(name: String, status: Status, detail: String) {
        self.name = name
        self.status = status
        self.detail = detail
    }
}

/// What this process can do with the kernel's keyrings, in words a user can act on.
public enum KeyringDiagnostics {
    public static func run() -> [DiagnosticCheck] {
        guard KeyringProbe.syscallsWork() else {
            return [DiagnosticCheck(name: "keyrings", status: .fail, detail:
                "keyring system calls are refused (seccomp in a container, or a kernel without CONFIG_KEYS); run kc on the host")]
        }
        return [session(), user(), persistent(), quota()]
    }

    private static func session() -> DiagnosticCheck {
        do {
            let serial = try SpecialKeyring.session.serial.resolved(create: false)
            let name = try serial.describe().description
            if name.hasPrefix("_uid_ses.") {
                return DiagnosticCheck(name: "session keyring", status: .warn, detail:
                    "\(serial) (\(name)): no login session keyring, so the uid's shared default is used; when-unlocked items are then seen by every process of the uid without its own session (pam_keyinit gives each login one)")
            }
            return DiagnosticCheck(name: "session keyring", status: .ok, detail: "\(serial) (\(name))")
        } catch {
            return DiagnosticCheck(name: "session keyring", status: .fail, detail: "\(error); when-unlocked items cannot be stored")
        }
    }

    private static func user() -> DiagnosticCheck {
        do {
            let serial = try SpecialKeyring.user.serial.resolved(create: true)
            let name = try serial.describe().description
            let linked = (try? SpecialKeyring.session.serial.linkedKeys().contains(serial)) ?? false
            return DiagnosticCheck(name: "user keyring", status: .ok, detail:
                "\(serial) (\(name))" + (linked ? ", linked in the session keyring" : ", not linked in the session keyring (kc reaches it directly)"))
        } catch {
            return DiagnosticCheck(name: "user keyring", status: .fail, detail: "\(error); after-first-unlock items cannot be stored")
        }
    }

    private static func persistent() -> DiagnosticCheck {
        do {
            let serial = try KeySerial.persistentKeyring(linkedInto: SpecialKeyring.thread.serial)
            let expiry = readSysctl("kernel/keys/persistent_keyring_expiry").map { "\($0) s" } ?? "unknown"
            return DiagnosticCheck(name: "persistent keyring", status: .ok, detail:
                "\(serial); expires after \(expiry) unused (kernel.keys.persistent_keyring_expiry) and at reboot")
        } catch {
            return DiagnosticCheck(name: "persistent keyring", status: .warn, detail:
                "\(error): 'always' items are unavailable (kernel without CONFIG_PERSISTENT_KEYRINGS?); use after-first-unlock")
        }
    }

    private static func quota() -> DiagnosticCheck {
        guard let usage = KeyQuota.current() else {
            return DiagnosticCheck(name: "key quota", status: .warn, detail: "/proc/key-users cannot be read")
        }
        let nearlyFull = usage.keys * 10 >= usage.maxKeys * 9 || usage.bytes * 10 >= usage.maxBytes * 9
        let sysctls = usage.uid == 0 ? "kernel.keys.root_maxkeys/root_maxbytes" : "kernel.keys.maxkeys/maxbytes"
        var detail = "uid \(usage.uid): \(usage.keys)/\(usage.maxKeys) keys, \(usage.bytes)/\(usage.maxBytes) bytes (\(sysctls))"
        // An ordinary user's whole quota (20,000 bytes) is less than one value of the
        // kernel's largest size: say what fits now, and how to make room.
        let largest = usage.largestNewValue(nameLength: 16)
        if largest < KeychainError.maximumValueSize {
            detail += "; room for \(usage.freeKeys) more keys, and a new value of at most \(largest) bytes (the kernel allows \(KeychainError.maximumValueSize)); more: \(usage.raiseCommand())"
        }
        return DiagnosticCheck(name: "key quota", status: nearlyFull ? .warn : .ok, detail: detail)
    }
}
