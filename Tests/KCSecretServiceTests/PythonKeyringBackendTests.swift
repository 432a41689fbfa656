import Foundation
import KCTestSupport
import XCTest

/// python `keyring`'s command with its SecretService backend (as on a desktop, where it is
/// the default): `keyring set/get/del` keep the secret in the kc item SERVICE/USER.
final class PythonKeyringBackendTests: KeyringTestCase {
    private var command = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        command = try SecretServiceClients.requireKeyringCommand()
    }

    private func keyring(_ bus: SessionBus, _ arguments: String..., input: String = "") throws -> CommandResult {
        try bus.client(command, arguments, input: Array(input.utf8), extraEnvironment: SecretServiceClients.keyringBackend)
    }

    func testSetGetDelRoundTripThroughOneStore() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()

        let set = try keyring(bus, "set", service, "bob", input: "py-s3cret\n")
        XCTAssertEqual(set.status, 0, "\(set)")
        XCTAssertEqual(try bus.kc("get", service, "bob").output, "py-s3cret", "keyring set stores the kc item SERVICE/USER (the line without its newline)")

        let got = try keyring(bus, "get", service, "bob")
        XCTAssertEqual(got.status, 0, "\(got)")
        XCTAssertEqual(got.output, "py-s3cret\n")

        let searched = try bus.python("""
            c = Client()
            unlocked, locked = c.search({'service': sys.argv[1], 'username': 'bob'})
            emit(found=len(unlocked) + len(locked), attributes=c.get(unlocked[0], ITEM, 'Attributes'), label=c.get(unlocked[0], ITEM, 'Label'))
            """, arguments: [service])
        XCTAssertEqual(searched["found"], 1)
        XCTAssertEqual(searched["attributes"]?["application"], "Python keyring library", "keyring's own attributes are kept: \(searched)")
        XCTAssertEqual(searched["label"], .string("Password for 'bob' on '\(service)'"))

        let deleted = try keyring(bus, "del", service, "bob")
        XCTAssertEqual(deleted.status, 0, "\(deleted)")
        XCTAssertEqual(try bus.kc("get", service, "bob").status, 1, "keyring del removes the kc item")
        let gone = try keyring(bus, "get", service, "bob")
        XCTAssertEqual(gone.status, 1, "\(gone)")
        XCTAssertEqual(gone.output, "")
    }

    /// `kc set` at its default level (when-unlocked: the `session` collection): python
    /// keyring searches the default collection only (secretd-bugs.md B1).
    func testAnItemStoredWithKCSetIsFoundByKeyringAndSecretTool() throws {
        try kcSetItemIsFound(options: [])
    }

    func testAnAfterFirstUnlockItemStoredWithKCSetIsFoundByKeyringAndSecretTool() throws {
        try kcSetItemIsFound(options: ["--access", "after-first-unlock"])
    }

    private func kcSetItemIsFound(options: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        XCTAssertEqual(try bus.run(builtKC, ["set"] + options + [service, "carol"], input: Array("fr0m-kc".utf8)).status, 0, file: file, line: line)

        let got = try keyring(bus, "get", service, "carol")
        XCTAssertEqual(got.status, 0, "keyring get of an item kc set stored: \(got)", file: file, line: line)
        XCTAssertEqual(got.output, "fr0m-kc\n", file: file, line: line)
        if FileManager.default.isExecutableFile(atPath: SecretServiceClients.secretTool) {
            let looked = try bus.secretTool("lookup", "service", service, "username", "carol")
            XCTAssertEqual(looked.status, 0, "\(looked)", file: file, line: line)
            XCTAssertEqual(looked.output, "fr0m-kc", file: file, line: line)
        }

        // keyring set over it gives the same kc item its new value.
        XCTAssertEqual(try keyring(bus, "set", service, "carol", input: "upd4ted\n").status, 0, file: file, line: line)
        XCTAssertEqual(try bus.kc("get", service, "carol").output, "upd4ted", file: file, line: line)
        XCTAssertEqual(try bus.kc("ls", service).output, "carol\n", file: file, line: line)
        XCTAssertEqual(try keyring(bus, "get", service, "carol").output, "upd4ted\n", file: file, line: line)
    }
}
