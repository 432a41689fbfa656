import KCTestSupport
import KernelKeychain
import XCTest

/// `import KernelKeychain` alone is enough to use the types its API names: `KeyName`
/// with its operators, `KeyNameConvertible`, `KeySerial`, `KeyctlError` and `Errno`.
/// This file imports no other module of kc's, and its target turns on
/// MemberImportVisibility, so a member it uses must come through that one import.
final class ImportKernelKeychainAloneTests: KeyringTestCase {
    func testAKeyNameIsBuiltAndUsedWithoutImportingKeyrings() throws {
        let keychain = try Keychain(service: uniqueService())
        let prefix: KeyName = "raw."
        let name = prefix + KeyName(bytes: [0x62, 0xfe])
        XCTAssertTrue(name.hasPrefix("raw."))
        XCTAssertEqual(name.dropFirst(4).bytes, [0x62, 0xfe])
        XCTAssertNil(name.text)
        XCTAssertEqual(name.description, "raw.b\\xfe")

        try keychain.set("exact", forKey: name)
        XCTAssertEqual(try keychain.string(forKey: name), "exact")
        XCTAssertEqual(try keychain.allKeyNames(), [name])
    }

    func testGenericCodeOverKeyNameConvertibleTakesTextAndBytes() throws {
        let keychain = try Keychain(service: uniqueService())
        func store(_ value: String, under key: some KeyNameConvertible) throws {
            try keychain.set(value, forKey: key)
        }
        try store("text", under: "plain")
        try store("bytes", under: KeyName(bytes: [0x70, 0xff]))
        XCTAssertEqual(keychain["plain"], "text")
        XCTAssertEqual(keychain[KeyName(bytes: [0x70, 0xff])], "bytes")
        XCTAssertEqual("plain".keyName, KeyName("plain"))
    }

    func testAnItemsSerialIsAKeySerialTheKernelDescribes() throws {
        let keychain = try Keychain(service: uniqueService())
        keychain["token"] = "v"
        let serial: KeySerial = try XCTUnwrap(keychain.item("token", withDeadline: false)).serial
        XCTAssertEqual(try serial.describe().type, "user", "an item is a user key")
        XCTAssertTrue(try serial.describe().description == "token")
    }

    func testAKernelFailureCarriesAKeyctlErrorAndItsErrno() throws {
        let gone = KeySerial(rawValue: Int32.max)  // no key has this serial
        do {
            _ = try gone.describe()
            XCTFail("describing a serial no key has fails")
        } catch {
            let failure: KeyctlError = error
            XCTAssertEqual(failure.errno, Errno.noKey)
            XCTAssertTrue(failure.meansKeyIsGone)
            XCTAssertEqual(KeychainError.kernel(failure).underlying?.errno, .noKey)
        }
        let denied = KeychainError.accessDenied(KeyctlError(.permissionDenied, call: "keyctl_read"))
        XCTAssertTrue(denied.description.contains("keyctl_read"), denied.description)
    }
}
