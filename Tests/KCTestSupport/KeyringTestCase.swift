import Foundation
import KernelKeychain
import Keyrings
import XCTest

/// Base class for suites that touch the real kernel. The first test joins a fresh
/// anonymous session keyring (XCTest runs tests on the main thread, and children
/// inherit it), so `when-unlocked` items never leak into the caller's session. Items
/// at `after-first-unlock` and `always` live in keyrings shared by the uid, so every
/// test names its services uniquely and removes them afterwards.
open class KeyringTestCase: XCTestCase {
    nonisolated(unsafe) private static var joinedSession: KeySerial?
    nonisolated(unsafe) private static var counter = 0

    /// Services made through ``uniqueService(_:)``; their keyrings are cleared in tearDown.
    public var servicesToRemove: [KeyName] = []

    open override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else {
            throw XCTSkip("kernel keyring system calls are unavailable here (seccomp or no CONFIG_KEYS)")
        }
        TestRunCleanup.register()
        // An ordinary user's 200-key quota: let the kernel collect what earlier tests removed.
        if getuid() != 0 { TestQuota.waitForRoom() }
        if KeyringTestCase.joinedSession == nil {
            KeyringTestCase.joinedSession = try KeySerial.joinSessionKeyring()
        }
    }

    open override func tearDownWithError() throws {
        for service in servicesToRemove { removeServiceKeyrings(service) }
        servicesToRemove = []
        try super.tearDownWithError()
    }

    /// The session keyring this test process joined.
    public var sessionKeyring: KeySerial { KeyringTestCase.joinedSession ?? SpecialKeyring.session.serial }

    public static var syscallsWork: Bool {
        (try? SpecialKeyring.session.serial.resolved(create: false)) != nil
    }

    /// A service name no other test or run uses; removed at tearDown.
    public func uniqueService(_ label: String = #function) -> String {
        KeyringTestCase.counter += 1
        let clean = label.filter { $0.isLetter || $0.isNumber }
        let name = "kc-test.\(getpid()).\(KeyringTestCase.counter).\(clean.prefix(40))"
        servicesToRemove.append(KeyName(name))
        return name
    }

    /// A unique service name ending in `suffix`, which may be bytes that are not UTF-8;
    /// removed after the test like ``uniqueService(_:)``'s.
    public func uniqueServiceName(_ label: String = #function, endingWith suffix: [UInt8]) -> KeyName {
        let name = KeyName(bytes: KeyName(uniqueService(label)).bytes + suffix)
        servicesToRemove.append(name)
        return name
    }

    /// Unlinks every `kc:`/`kc.local:` keyring of the service from the three anchors,
    /// after kc's own removal, which also drops the items' deadline records (each a key
    /// of the uid's quota until the item's deadline).
    public func removeServiceKeyrings(_ service: some KeyNameConvertible) {
        try? Keychain(service: service).removeAll()
        var anchors = [SpecialKeyring.session.serial, SpecialKeyring.user.serial]
        if let persistent = try? KeySerial.persistentKeyring(linkedInto: SpecialKeyring.thread.serial) {
            anchors.append(persistent)
        }
        for anchor in anchors {
            for prefix in ["kc:", "kc.local:"] {
                while let ring = try? anchor.search(type: "keyring", description: KeyName(prefix) + service.keyName),
                      (try? anchor.linkedKeys().contains(ring)) == true {
                    try? ring.clear()
                    try? ring.unlink(from: anchor)
                }
            }
        }
    }
}
