import KCTestSupport
import KernelKeychain
import XCTest

/// Code that names services and items with `String`s, as it did before names became
/// bytes, compiles and behaves as it did: names compare with text byte for byte.
final class StringNamesTests: KeyringTestCase {
    func testServicesContainsAServiceNamedByAString() throws {
        let service: String = uniqueService()
        XCTAssertFalse(try Keychain.services().contains(service))
        try Keychain(service: service).set("v", forKey: "k")
        XCTAssertTrue(try Keychain.services().contains(service))
        try Keychain(service: service).removeAll()
        XCTAssertFalse(try Keychain.services().contains(service), "removeAll removes the service")
    }

    func testItemNamesAndServicesCompareWithStrings() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        keychain["a"] = "1"
        keychain["b"] = "2"
        let items = try keychain.items()
        XCTAssertTrue(items.map(\.name) == ["a", "b"])
        XCTAssertTrue(items.allSatisfy { $0.service == service && service == $0.service })
        let first = "a"
        XCTAssertTrue(items[0].name == first && first == items[0].name)
        XCTAssertTrue(items[0].name != "b" && "b" != items[0].name)
        XCTAssertTrue(try keychain.itemNames().contains(first))
        XCTAssertTrue(try keychain.allKeyNames().contains("b"))
        XCTAssertFalse(try keychain.allKeyNames().contains("c"))
    }

    func testEveryKeyedMethodTakesAStringKey() throws {
        let keychain = try Keychain(service: uniqueService())
        let key: String = "token", renamed: String = "renamed"
        keychain[key] = "s3cret"
        XCTAssertEqual(keychain[bytes: key], Array("s3cret".utf8))
        XCTAssertTrue(try keychain.contains(key))
        XCTAssertTrue(try keychain.matches("s3cret", forKey: key))
        XCTAssertEqual(try keychain.withBytes(forKey: key) { $0.count }, 6)
        XCTAssertEqual(try keychain.size(ofItem: key), 6)
        XCTAssertTrue(try keychain.replace(Array("changed".utf8), forKey: key))
        XCTAssertTrue(try keychain.setTimeout(.seconds(3600), forKey: key))
        XCTAssertNotNil(try keychain.deadline(forKey: key))
        XCTAssertTrue(try keychain.move(key, to: .afterFirstUnlock))
        XCTAssertEqual(try keychain.item(key)?.accessibility, .afterFirstUnlock)
        XCTAssertTrue(try keychain.rename(key, to: renamed))
        XCTAssertEqual(try keychain.string(forKey: renamed), "changed")
        try keychain.set(json: [1, 2], forKey: key)
        XCTAssertEqual(try keychain.json([Int].self, forKey: key), [1, 2])
        XCTAssertTrue(try keychain.remove(key) && keychain.remove(renamed))
        XCTAssertTrue(try keychain.allKeyNames().isEmpty)
    }

    func testExportAndImportTakeStringServiceNames() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service, accessibility: .afterFirstUnlock)
        try keychain.set("one", forKey: "a")
        try keychain.set([0x00, 0xff], forKey: "b")

        let exported = try Keychain.export(services: [service]).items
        XCTAssertTrue(exported.map(\.name) == ["a", "b"])
        XCTAssertTrue(exported.allSatisfy { $0.service == service && $0.level == .afterFirstUnlock })

        try keychain.removeAll()
        let added = ExportedItem(service: service, name: "c", level: .always, secondsLeft: nil, value: Array("three".utf8))
        let steps = try Keychain.importItems(exported + [added], overwrite: false)
        XCTAssertEqual(steps.map(\.action), [.add, .add, .add])
        XCTAssertEqual(try keychain.string(forKey: "a"), "one")
        XCTAssertEqual(try keychain.data(forKey: "b"), [0x00, 0xff])
        XCTAssertEqual(try keychain.item("c")?.accessibility, .always, "the item made from Strings kept its level")
    }

    func testAnEmptyServiceListStillExportsEveryService() throws {
        let service = uniqueService()
        try Keychain(service: service).set("v", forKey: "k")
        let everything = try Keychain.export(services: []).items
        XCTAssertTrue(everything.contains { $0.service == service && $0.name == "k" })
    }

    func testNamesCompareByteForByteNotByCanonicalEquivalence() throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        XCTAssertTrue(composed == decomposed, "String's == calls the two spellings equal")
        XCTAssertFalse(KeyName(composed) == decomposed, "as names they are two")

        let keychain = try Keychain(service: uniqueService())
        keychain[composed] = "composed"
        let names = try keychain.allKeyNames()
        XCTAssertTrue(names.contains(composed))
        XCTAssertFalse(names.contains(decomposed), "the kernel would not find the other spelling either")
        XCTAssertNil(keychain[decomposed])
    }

    func testANameThatIsNotUTF8EqualsNoString() throws {
        let keychain = try Keychain(service: uniqueService())
        let latin1 = KeyName(bytes: Array("caf".utf8) + [0xe9])
        try keychain.set("v", forKey: latin1)
        let shown = try keychain.allKeys()  // text, with U+FFFD for the byte that is not UTF-8
        XCTAssertEqual(shown, ["caf\u{FFFD}"])
        XCTAssertTrue(try keychain.items()[0].name != shown[0], "the text shown is not the name")
        XCTAssertTrue(try keychain.items()[0].name == latin1)
        XCTAssertEqual(try keychain.string(forKey: latin1), "v")
    }

    /// Lists of names compare with lists of `String`s, as tests written when names were
    /// `String`s compare them (`try keychain.items().map(\.name) == ["a", "b"]`, and with
    /// a `[String]` in a variable).
    func testListsOfNamesCompareWithListsOfStrings() throws {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        try keychain.set("1", forKey: "a")
        try keychain.set("2", forKey: "b")
        let expected = ["a", "b"]
        XCTAssertTrue(try keychain.items().map(\.name) == ["a", "b"])
        XCTAssertTrue(try keychain.items().map(\.name) == expected)
        XCTAssertTrue(try keychain.allKeyNames() == expected)
        XCTAssertTrue(try expected == keychain.allKeyNames())
        XCTAssertTrue(try keychain.allKeyNames() != ["a"])
        XCTAssertTrue(try keychain.allKeyNames() != ["b", "a"], "in order")
        XCTAssertFalse(try [KeyName(bytes: [0x61, 0xff])] == ["a\u{FFFD}"], "a name that is not UTF-8 equals no String")
    }
}
