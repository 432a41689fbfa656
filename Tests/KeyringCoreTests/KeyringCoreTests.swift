import KCTestSupport
import KeyringCore
import Keyrings
import XCTest

/// The keyring core in-process (it is also compiled into the front, whose tests run it
/// through the front's commands): its rules, its parsers, and its kernel calls against
/// the real kernel in this test's own session keyring.
final class KeyringCoreTests: KeyringTestCase {
    // MARK: Names

    func testNameRules() {
        for valid in ["a", "com.example", "a b", String(repeating: "x", count: 255), "...", ".a", "é"] {
            XCTAssertTrue(NameRules.isValid(Array(valid.utf8)), valid)
        }
        for invalid in ["", ".", "..", "a/b", "/", String(repeating: "x", count: 256)] {
            XCTAssertFalse(NameRules.isValid(Array(invalid.utf8)), invalid)
        }
        XCTAssertFalse(NameRules.isValid([0x61, 0, 0x62]), "a NUL is never part of a name")
        XCTAssertTrue(NameRules.isValid([0xff, 0xfe]), "names are bytes, not necessarily UTF-8")
    }

    func testNamesAreShownWithInvalidBytesEscaped() {
        func shown(_ bytes: [UInt8]) -> String {
            var out: [UInt8] = []
            bytes.withUnsafeBytes { NameRules.appendShown($0, to: &out) }
            return String(decoding: out, as: UTF8.self)
        }
        XCTAssertEqual(shown(Array("café".utf8)), "café")
        XCTAssertEqual(shown([0x61, 0xff, 0x62]), "a\\xffb")
        XCTAssertEqual(shown([0xed, 0xa0, 0x80]), "\\xed\\xa0\\x80", "a surrogate is not well-formed UTF-8")
        XCTAssertEqual(shown([0xc0, 0xaf]), "\\xc0\\xaf", "an overlong form is not either")
        // Cut short, beyond U+10FFFF, overlong in three and four bytes, a control byte and
        // a backslash (shown as they are), valid multi-byte sequences: what a miss's
        // message shows in both programs (FrontTests compared them until they shared this).
        XCTAssertEqual(shown([0x61, 0xe2, 0x82]), "a\\xe2\\x82")
        XCTAssertEqual(shown([0xf4, 0x90, 0x80, 0x80]), "\\xf4\\x90\\x80\\x80")
        XCTAssertEqual(shown([0xe0, 0x9f, 0x80]), "\\xe0\\x9f\\x80")
        XCTAssertEqual(shown([0xf0, 0x8f, 0xbf, 0xbf]), "\\xf0\\x8f\\xbf\\xbf")
        XCTAssertEqual(shown([0x01, 0x7f, 0x5c, 0x78]), "\u{01}\u{7f}\\x")
        XCTAssertEqual(shown(Array("é€😀".utf8) + [0xff]), "é€😀\\xff")
        // The full kc's messages show names the same way.
        XCTAssertEqual(KeyName(bytes: [0x61, 0xff, 0x62]).description, "a\\xffb")
    }

    // MARK: Parsers

    func testDescribeStringsParse() throws {
        func parse(_ text: String) -> DescribeFields? {
            var bytes = Array(text.utf8)
            bytes.append(0)
            return bytes.withUnsafeBytes { DescribeFields($0) }
        }
        let fields = try XCTUnwrap(parse("user;1000;100;3f010000;a;b"))
        XCTAssertEqual(fields.uid, 1000)
        XCTAssertEqual(fields.gid, 100)
        XCTAssertEqual(fields.permissions, 0x3f01_0000)
        XCTAssertEqual(fields.typeLength, 4)
        XCTAssertEqual(fields.descriptionOffset, 23, "the description is everything after the fourth ';'")
        XCTAssertEqual(parse("keyring;-1;-1;0;x")?.uid, UInt32.max, "an unmapped id is shown as -1")
        for malformed in ["user;1000;100;3f010000", ";1;1;1;x", "user;x;1;1;x", "user;1;1;123456789;x", "user;;1;1;x"] {
            XCTAssertNil(parse(malformed), malformed)
        }
    }

    func testProcKeysLinesParse() throws {
        let text = Array("""
            1a2b3c4d I--Q---     1 perm 3f010000  1000  1000 keyring   kc:com.example: empty
            0000abcd I--Q---     1 2d   3f010000  1000  1000 user      token: 5
            0000abce I--Q---     1 3w   3f010000    -2  1000 user      other: 5
            not a line
            0000abcf I--Q---     1 13x  3f010000  1000  1000 user      bad: 5

            """.utf8)
        var lines: [(ProcKeysLine, String)] = []
        text.withUnsafeBytes { raw in
            ProcKeysLine.forEach(in: raw) { line in
                lines.append((line, String(decoding: UnsafeRawBufferPointer(rebasing: raw[line.descriptionPrefix]), as: UTF8.self)))
                return true
            }
        }
        XCTAssertEqual(lines.count, 3, "the malformed lines are passed over")
        XCTAssertEqual(lines[0].0.serial, 0x1a2b_3c4d)
        XCTAssertEqual(lines[0].0.expiry, .never)
        XCTAssertEqual(lines[0].1, "kc:com.example")
        XCTAssertEqual(lines[1].0.expiry, .within(seconds: 2 * 86400, unit: 86400))
        XCTAssertEqual(lines[1].1, "token")
        XCTAssertEqual(lines[2].0.uid, UInt32(bitPattern: -2))
        XCTAssertEqual(lines[2].0.expiry, .within(seconds: 3 * 604_800, unit: 604_800))
        text.withUnsafeBytes { raw in
            XCTAssertTrue(ProcKeysLine(raw, from: 0, to: 79).map { $0.isServiceKeyring(in: raw) } ?? false)
        }
        // The full kc's entries are the same lines.
        XCTAssertEqual(ProcKeysEntry.parse(String(decoding: text, as: UTF8.self)).map(\.serial.rawValue),
                       [0x1a2b_3c4d, 0xabcd, 0xabce])
    }

    func testCredentialNamesRoundTrip() throws {
        for part in ["alice", "a/b%c", ".", "..", "a:b"] {
            let item = try XCTUnwrap(CredentialNameCodec.item(Array(part.utf8)))
            XCTAssertFalse(item.contains(UInt8(ascii: "/")))
            XCTAssertEqual(CredentialNameCodec.decode(item), Array(part.utf8))
        }
        XCTAssertEqual(CredentialNameCodec.item(Array(".".utf8)), Array("%2E".utf8))
        XCTAssertNil(CredentialNameCodec.item([UInt8]()))
        XCTAssertNil(CredentialNameCodec.item([UInt8](repeating: UInt8(ascii: "/"), count: 86)), "encoded, over 255 bytes")
        XCTAssertNil(CredentialNameCodec.decode(Array("%latest".utf8)), "git's own records are never a part")
        XCTAssertNil(CredentialNameCodec.decode(Array("%2f".utf8)), "escapes are upper case only")
        var name: [UInt8] = []
        CredentialNameCodec.appendEncoded(Array("https:x".utf8), escapingColon: true, to: &name)
        XCTAssertEqual(String(decoding: name, as: UTF8.self), "https%3Ax")
    }

    func testJSONStringsAreReadAndWrittenExactly() {
        func read(_ text: String) -> (String?, JSONString.ReadError?) {
            var value: [UInt8] = []
            var position = 0
            let error = Array(text.utf8).withUnsafeBytes { JSONString.read($0, at: &position, into: &value) }
            return (error == nil ? String(decoding: value, as: UTF8.self) : nil, error)
        }
        XCTAssertEqual(read(#""a\"b\\c\/\n\u00e9\ud83d\ude00""#).0, "a\"b\\c/\né😀")
        XCTAssertEqual(read(#""\ud800""#).1, .loneSurrogate)
        XCTAssertEqual(read(#""\udc00""#).1, .loneSurrogate)
        XCTAssertEqual(read(#""\u12g4""#).1, .invalidUnicodeEscape)
        XCTAssertEqual(read(#""\x""#).1, .invalidEscape)
        XCTAssertEqual(read("\"tab\there\"").1, .unescapedControl)
        XCTAssertEqual(read(#""open"#).1, .unterminated)
        var written: [UInt8] = []
        XCTAssertTrue(Array("q\"\\\u{1}\u{7f}é".utf8).withUnsafeBytes { JSONString.append($0, to: &written) })
        XCTAssertEqual(String(decoding: written, as: UTF8.self), #""q\"\\\u0001\u007fé""#)
        XCTAssertFalse([UInt8]([0xff]).withUnsafeBytes { JSONString.append($0, to: &written) }, "not UTF-8: nothing appended")
    }

    func testPlainCommandLines() {
        func read(_ words: [String], _ spelling: PlainCommandLine.Spelling) -> (names: [String], quiet: Bool, group: String?)? {
            var storage = words.map { strdup($0) } + [nil]
            defer { storage.forEach { free($0) } }
            return storage.withUnsafeMutableBufferPointer { argv in
                PlainCommandLine(argc: Int32(words.count), argv: argv.baseAddress!, from: 2, spelling).map { line in
                    (line.names.map { String(cString: $0) }, line.has(["-q", "--quiet"]),
                     line.valueWord(["--group"]).map { String(cString: $0) })
                }
            }
        }
        let get = PlainCommandLine.Spelling(flags: [["-q", "--quiet"]], options: [["--group"]], names: 2...2)
        XCTAssertEqual(read(["kc", "get", "s", "k"], get)?.names, ["s", "k"])
        XCTAssertEqual(read(["kc", "get", "-q", "s", "k"], get)?.quiet, true)
        XCTAssertEqual(read(["kc", "get", "s", "--group", "g", "k"], get)?.group, "g")
        XCTAssertEqual(read(["kc", "get", "--", "-s", "k"], get)?.names, ["-s", "k"])
        for refused in [["kc", "get", "s"], ["kc", "get", "-q", "-q", "s", "k"], ["kc", "get", "--group=g", "s", "k"],
                        ["kc", "get", "--group", "-g", "s", "k"], ["kc", "get", "--group", "", "s", "k"], ["kc", "get", "-x", "s", "k"]] {
            XCTAssertNil(read(refused, get), "\(refused) is the parser's to read")
        }
    }

    func testAccountRecordsAreReadAsGlibcReadsThem() {
        let text = Array("""
            # a comment
            root:x:0:0:root:/root:/bin/bash
            +nis

             space:x:5:5::/:/bin/sh
            alice:x:1000:1000:Alice:/home/alice:/bin/bash
            bad:x:4294967295:1::/:
            """.utf8)
        var names: [String] = [], ids: [UInt32?] = []
        text.withUnsafeBytes { raw in
            AccountFiles.forEachRecord(in: raw) { fields in
                names.append(String(decoding: UnsafeRawBufferPointer(rebasing: raw[fields[0]]), as: UTF8.self))
                ids.append(AccountFiles.id(raw[fields[2]]))
                return true
            }
        }
        XCTAssertEqual(names, ["root", "space", "alice", "bad"], "blanks before a record are passed over, as glibc does")
        XCTAssertEqual(ids, [0, 5, 1000, nil], "2^32 - 1 means no id")
    }

    func testVaultLocationFollowsTheEnvironment() throws {
        let saved = (getenv("XDG_DATA_HOME").map { String(cString: $0) }, getenv("HOME").map { String(cString: $0) })
        defer {
            if let data = saved.0 { setenv("XDG_DATA_HOME", data, 1) } else { unsetenv("XDG_DATA_HOME") }
            if let home = saved.1 { setenv("HOME", home, 1) } else { unsetenv("HOME") }
        }
        setenv("XDG_DATA_HOME", "/tmp", 1)
        XCTAssertEqual(VaultLocation.rootFromEnvironment.map { String(decoding: $0, as: UTF8.self) }, "/tmp/kc")
        setenv("XDG_DATA_HOME", "relative", 1)
        setenv("HOME", "relative", 1)
        XCTAssertNil(VaultLocation.rootFromEnvironment, "a relative path is no place: the password database decides")
        XCTAssertEqual(String(decoding: VaultLocation.stashDescription(root: Array("/v".utf8)), as: UTF8.self), "kc.vault:/v")
    }

    // MARK: Kernel calls

    func testTheProbeFindsOwnKeyringsAndLeavesOthersToTheFullKC() throws {
        let service = "kc-core-test.\(getpid())"
        XCTAssertEqual(ServiceKeyringProbe.find(service, prefix: "kc:", under: sessionKeyring.rawValue), .absent)
        let ring = try KeySerial.add(type: "keyring", description: KeyName("kc:" + service), payload: nil, into: sessionKeyring)
        defer { try? ring.unlink(from: sessionKeyring) }
        try ring.setPermissions(KeyPermissions(rawValue: 0x003f_0000))
        XCTAssertEqual(ServiceKeyringProbe.find(service, prefix: "kc:", under: sessionKeyring.rawValue), .found(ring.rawValue))
        let item = try Array("v".utf8).withUnsafeBytes { try KeySerial.add(type: "user", description: "token", payload: $0, into: ring) }
        var names: [[UInt8]] = []
        XCTAssertTrue(ServiceKeyringProbe.appendUserKeyNames(of: ring.rawValue, to: &names, checkingSize: true))
        XCTAssertEqual(names, [Array("token".utf8)])
        XCTAssertEqual(ServiceKeyringProbe.linkedKeys(of: ring.rawValue), [item.rawValue])
        var visited: [Int32] = []
        XCTAssertTrue(ServiceKeyringProbe.probe(service) { found, linkedDirectly in
            visited.append(found)
            XCTAssertTrue(linkedDirectly)
            return true
        })
        XCTAssertEqual(visited, [ring.rawValue])

        // A mask kc never makes (possessor rights) is the full kc's to repair: uncertain.
        try ring.setPermissions(KeyPermissions(rawValue: 0x3f3f_0000))
        XCTAssertEqual(ServiceKeyringProbe.find(service, prefix: "kc:", under: sessionKeyring.rawValue), .uncertain)
        XCTAssertTrue(ServiceKeyringProbe.needsRepair(permissions: 0x3f3f_0000))
        XCTAssertTrue(ServiceKeyringProbe.needsRepair(permissions: 0x003f_0c00), "group write or search")
        XCTAssertFalse(ServiceKeyringProbe.needsRepair(permissions: 0x003f_0b00 & ~0x0c00))
    }

    func testDescribeOfARealKey() throws {
        let key = try Array("x".utf8).withUnsafeBytes {
            try KeySerial.add(type: "user", description: "kc-core;describe.\(getpid())", payload: $0, into: sessionKeyring)
        }
        defer { try? key.unlink(from: sessionKeyring) }
        let described = KeyDescribe.read(key.rawValue) { fields, text in
            (fields.hasType("user", in: text), fields.uid, String(cString: text.cString(at: fields.descriptionOffset)))
        }
        XCTAssertEqual(described?.0, true)
        XCTAssertEqual(described?.1, geteuid())
        XCTAssertEqual(described?.2, "kc-core;describe.\(getpid())")
        XCTAssertNil(KeyDescribe.read(0x7fff_fff0) { _, _ in true }, "no such key")
    }
}
