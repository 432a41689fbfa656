import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc-secretd serves its own uid only. A session bus normally admits only its owner;
/// this one admits every user (`<allow user="*"/>`), so another user reaches the daemon
/// and must be refused by it.
final class SecretServiceAccessTests: KeyringTestCase {
    func testAnotherUserOnTheBusGetsNothing() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root, to act as the test user \(UnprivilegedUser.name)") }
        guard programExists("secret-tool") else { throw XCTSkip("no secret-tool (Debian's libsecret-tools)") }
        let bus = try SessionBus(allowEveryUser: true)
        defer { bus.stop() }
        let service = uniqueService()
        let stored = try bus.run("/usr/bin/secret-tool", ["store", "--label", "mine", "service", service, "username", "alice"], input: Array("root-only".utf8))
        XCTAssertEqual(stored.status, 0, stored.description)
        let address = "DBUS_SESSION_BUS_ADDRESS='\(bus.address)'; export DBUS_SESSION_BUS_ADDRESS; "

        let search = try UnprivilegedUser.run(address + "dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.Secret.Service.SearchItems dict:string:string:service,'\(service)'")
        XCTAssertNotEqual(search.status, 0, search.description)
        XCTAssertTrue(search.standardError.contains("org.freedesktop.DBus.Error.AccessDenied"), search.description)
        XCTAssertTrue(search.standardError.contains("serves uid 0 only"), search.description)

        let lookup = try UnprivilegedUser.run(address + "secret-tool lookup service '\(service)' username alice")
        XCTAssertNotEqual(lookup.status, 0, lookup.description)
        XCTAssertFalse(lookup.output.contains("root-only"), lookup.description)
        let item = "/org/freedesktop/secrets/collection/login/" + service.utf8.map { byte -> String in
            let c = Character(Unicode.Scalar(byte))
            return c.isLetter || c.isNumber ? String(c) : "_" + String(byte, radix: 16)
        }.joined() + "__alice"
        let property = try UnprivilegedUser.run(address + "dbus-send --session --print-reply --dest=org.freedesktop.secrets \(item) org.freedesktop.DBus.Properties.Get string:org.freedesktop.Secret.Item string:Attributes")
        XCTAssertTrue(property.standardError.contains("AccessDenied"), property.description)

        // The owner is still served.
        XCTAssertEqual(try bus.run("/usr/bin/secret-tool", ["lookup", "service", service, "username", "alice"]).output, "root-only")
        _ = try Keychain(service: service).remove("alice")
    }
}
