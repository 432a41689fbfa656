import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// An item's deadline (its kernel expiry) is the user's: only an explicit `--timeout`
/// or `user.kc.timeout` changes it. Saving, editing, moving to another level, renaming
/// and an export/import cycle each keep it to within a second, and never lengthen it.
///
/// How the deadline is read: /proc/keys shows time left rounded down to a whole unit
/// (`50s`, `59m`, `1h`, `6d`, `1w`), so under a minute it is exact; above, the tests
/// check what kc reports (`kc ls --long --json` secondsLeft, `user.kc.timeout`) to the
/// second, and that the kernel's rounded value agrees (13 days shows `1w`: a deadline
/// cut to 7 days shows `6d` a second later; 1h59m shows `1h`, cut to 1 h it shows `59m`).
final class DeadlineTests: MountingTestCase {

    private static let thirteenDays: Int64 = 13 * 86_400
    private static let oneHourFiftyNine: Int64 = 3600 + 59 * 60

    /// Where a deadline set at some moment lies: between the second before `kc set`
    /// started and the second after it ended, plus the timeout.
    private struct Deadline {
        var earliest: Int64
        var latest: Int64
        var timeout: Int64
    }

    private func set(_ service: String, _ key: String, _ value: String, timeout: String, seconds: Int64,
                     access: String = "when-unlocked", deviceOnly: Bool = false) throws -> Deadline {
        let before = wallSeconds()
        let result = try kc(["set", "--access", access, "--timeout", timeout] + (deviceOnly ? ["--this-device-only"] : [])
                            + [service, key], input: Array(value.utf8))
        let after = wallSeconds()
        XCTAssertEqual(result.status, 0, "kc set --timeout \(timeout): \(result)")
        return Deadline(earliest: before + seconds, latest: after + seconds, timeout: seconds)
    }

    /// kc's report of the time left must put the deadline within −2…+1 s of the one
    /// set, and the kernel's rounded expiry must agree with that.
    private func assertDeadline(_ service: String, _ key: String, is deadline: Deadline, after operation: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let before = wallSeconds()
        let items = try listedItems(service, file: file, line: line)
        let after = wallSeconds()
        guard let item = items.first(where: { $0.name == key }) else {
            XCTFail("\(operation): \(service)/\(key) is gone (listed: \(items.map(\.name)))", file: file, line: line)
            return
        }
        let expected = deadline.latest - before
        guard let left = item.secondsLeft.map(Int64.init) else {
            XCTFail("\(operation): kc ls shows no deadline at all; expected about \(expected) s left", file: file, line: line)
            return
        }
        XCTAssertTrue(after + left >= deadline.earliest - 2 && before + left <= deadline.latest + 1,
                      "\(operation): kc ls --long --json shows secondsLeft \(left); the \(deadline.timeout) s timeout set "
                      + "\(before - (deadline.earliest - deadline.timeout)) s ago leaves about \(expected) s "
                      + "(allowed: 2 s less to 1 s more)", file: file, line: line)
        try assertKernelExpiry(serial: item.serial, deadline, operation, file: file, line: line)
    }

    /// /proc/keys' rounded time left must be one a deadline within −2…+1 s shows.
    private func assertKernelExpiry(serial: Int32, _ deadline: Deadline, _ operation: String,
                                    file: StaticString = #filePath, line: UInt = #line) throws {
        let before = wallSeconds()
        let field = procKeysExpiry(serial: serial)
        let after = wallSeconds()
        let allowed = Set(((deadline.earliest - 2 - after)...(deadline.latest + 1 - before)).map(procKeysDisplay))
        XCTAssertTrue(field.map(allowed.contains) ?? false,
                      "\(operation): /proc/keys shows the key expiring in \(field ?? "(key not found)"); the deadline "
                      + "set (\(deadline.timeout) s) shows \(allowed.sorted().joined(separator: " or "))", file: file, line: line)
    }

    /// `getfattr -n user.kc.timeout` through the mount: seconds left, to the second.
    private func assertTimeoutAttribute(_ path: String, is deadline: Deadline, after operation: String,
                                        file: StaticString = #filePath, line: UInt = #line) throws {
        guard programExists("getfattr") else { return }
        let before = wallSeconds()
        let result = try runCommand("/usr/bin/getfattr", ["--only-values", "-n", "user.kc.timeout", path])
        let after = wallSeconds()
        guard result.status == 0, let left = Int64(result.output) else {
            XCTFail("\(operation): getfattr -n user.kc.timeout \(path): \(result)", file: file, line: line)
            return
        }
        XCTAssertTrue(after + left >= deadline.earliest - 2 && before + left <= deadline.latest + 1,
                      "\(operation): user.kc.timeout is \(left); the \(deadline.timeout) s timeout leaves about "
                      + "\(deadline.latest - before) s (allowed: 2 s less to 1 s more)", file: file, line: line)
    }

    /// A cut to the next unit down (13d → 7d, 1h59m → 1h) shows in /proc/keys only
    /// once a second has passed since the operation.
    private func letASecondPass() { Thread.sleep(forTimeInterval: 1.2) }

    // MARK: Reading the deadline

    func testListingShowsALongDeadlineToTheSecond() throws {
        let service = uniqueService()
        let long = try set(service, "k13d", "v", timeout: "13d", seconds: Self.thirteenDays)
        let medium = try set(service, "k1h59m", "v", timeout: "1h59m", seconds: Self.oneHourFiftyNine)
        try assertDeadline(service, "k13d", is: long, after: "kc set --timeout 13d")
        try assertDeadline(service, "k1h59m", is: medium, after: "kc set --timeout 1h59m")
    }

    // MARK: Operations through the mount

    func testASaveThroughTheMountKeepsTheDeadline() throws {
        let mount = try mount()
        let service = uniqueService()
        let long = try set(service, "k13d", "old", timeout: "13d", seconds: Self.thirteenDays)
        let medium = try set(service, "k1h59m", "old", timeout: "1h59m", seconds: Self.oneHourFiftyNine, access: "after-first-unlock")
        for key in ["k13d", "k1h59m"] {
            let result = try runShell("printf x > '\(mount.file(service, key))'")
            XCTAssertEqual(result.status, 0, "\(result)")
        }
        letASecondPass()
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k13d"), "x")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k1h59m"), "x")
        try assertDeadline(service, "k13d", is: long, after: "printf x > M/s/k (13d)")
        try assertDeadline(service, "k1h59m", is: medium, after: "printf x > M/s/k (1h59m)")
        try assertTimeoutAttribute(mount.file(service, "k13d"), is: long, after: "printf x > M/s/k (13d)")
    }

    func testSedInPlaceKeepsTheDeadline() throws {
        let mount = try mount()
        let service = uniqueService()
        let long = try set(service, "k13d", "a-value\n", timeout: "13d", seconds: Self.thirteenDays)
        let medium = try set(service, "k1h59m", "a-value\n", timeout: "1h59m", seconds: Self.oneHourFiftyNine)
        for key in ["k13d", "k1h59m"] {
            let result = try runCommand("/bin/sed", ["-i", "s/a/b/", mount.file(service, key)])
            XCTAssertEqual(result.status, 0, "\(result)")
        }
        letASecondPass()
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k13d"), "b-value\n")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["k13d", "k1h59m"], "no temp file left behind")
        try assertDeadline(service, "k13d", is: long, after: "sed -i s/a/b/ M/s/k (13d)")
        try assertDeadline(service, "k1h59m", is: medium, after: "sed -i s/a/b/ M/s/k (1h59m)")
    }

    func testMovingAnItemToAnotherLevelKeepsItsDeadline() throws {
        guard programExists("setfattr") else { throw XCTSkip("setfattr is not installed (package attr)") }
        let mount = try mount()
        let service = uniqueService()
        let long = try set(service, "k13d", "v13", timeout: "13d", seconds: Self.thirteenDays)
        let medium = try set(service, "k1h59m", "v119", timeout: "1h59m", seconds: Self.oneHourFiftyNine)
        for key in ["k13d", "k1h59m"] {
            let result = try runCommand("/usr/bin/setfattr", ["-n", "user.kc.access", "-v", "after-first-unlock", mount.file(service, key)])
            XCTAssertEqual(result.status, 0, "\(result)")
        }
        letASecondPass()
        let items = try listedItems(service)
        XCTAssertEqual(items.map(\.access), ["after-first-unlock", "after-first-unlock"], "the level moved")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k13d"), "v13")
        try assertDeadline(service, "k13d", is: long, after: "setfattr -n user.kc.access -v after-first-unlock (13d)")
        try assertDeadline(service, "k1h59m", is: medium, after: "setfattr -n user.kc.access -v after-first-unlock (1h59m)")
    }

    func testRenamingAnItemNeverLengthensOrShortensItsDeadline() throws {
        let mount = try mount()
        let service = uniqueService()
        let long = try set(service, "k13d", "v13", timeout: "13d", seconds: Self.thirteenDays)
        let medium = try set(service, "k1h59m", "v119", timeout: "1h59m", seconds: Self.oneHourFiftyNine, access: "always")
        for key in ["k13d", "k1h59m"] {
            let result = try runCommand("/bin/mv", [mount.file(service, key), mount.file(service, key + "-renamed")])
            XCTAssertEqual(result.status, 0, "\(result)")
        }
        letASecondPass()
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["k13d-renamed", "k1h59m-renamed"])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k13d-renamed"), "v13")
        try assertDeadline(service, "k13d-renamed", is: long, after: "mv M/s/k M/s/k2 (13d)")
        try assertDeadline(service, "k1h59m-renamed", is: medium, after: "mv M/s/k M/s/k2 (1h59m)")
    }

    /// Under a minute /proc/keys shows the deadline to the second: each operation may
    /// move it by at most one second.
    func testEveryMountOperationMovesAShortDeadlineByAtMostOneSecond() throws {
        guard programExists("setfattr") else { throw XCTSkip("setfattr is not installed (package attr)") }
        let mount = try mount()
        let service = uniqueService()
        _ = try set(service, "k", "a-value", timeout: "50s", seconds: 50)
        func deadline(_ key: String) throws -> Int64? {
            let serial = try XCTUnwrap(listedItems(service).first { $0.name == key }?.serial, "\(key) is gone")
            return exactKernelDeadline(serial: serial)
        }
        var previous = try XCTUnwrap(deadline("k"), "/proc/keys shows seconds for a 50 s timeout")
        let steps: [(String, String, () throws -> CommandResult)] = [
            ("printf a-value2 > M/s/k", "k", { try runShell("printf a-value2 > '\(mount.file(service, "k"))'") }),
            ("sed -i s/a/b/ M/s/k", "k", { try runCommand("/bin/sed", ["-i", "s/a/b/", mount.file(service, "k")]) }),
            ("setfattr -n user.kc.access -v after-first-unlock", "k",
             { try runCommand("/usr/bin/setfattr", ["-n", "user.kc.access", "-v", "after-first-unlock", mount.file(service, "k")]) }),
            ("setfattr -n user.kc.this-device-only -v 1", "k",
             { try runCommand("/usr/bin/setfattr", ["-n", "user.kc.this-device-only", "-v", "1", mount.file(service, "k")]) }),
            ("mv M/s/k M/s/k2", "k2", { try runCommand("/bin/mv", [mount.file(service, "k"), mount.file(service, "k2")]) }),
        ]
        for (name, key, step) in steps {
            let result = try step()
            XCTAssertEqual(result.status, 0, "\(name): \(result)")
            guard let now = try deadline(key) else { XCTFail("\(name): no deadline in seconds left"); return }
            XCTAssertLessThanOrEqual(abs(now - previous), 1, "\(name) moved the deadline by \(now - previous) s")
            previous = now
        }
    }

    // MARK: Export and import

    func testExportThenImportKeepsAThirteenDayDeadline() throws {
        let service = uniqueService()
        let long = try set(service, "k13d", "v13", timeout: "13d", seconds: Self.thirteenDays, access: "after-first-unlock")
        let medium = try set(service, "k1h59m", "v119", timeout: "1h59m", seconds: Self.oneHourFiftyNine)
        let exported = try kc("export", "--service", service, "--format", "json")
        XCTAssertEqual(exported.status, 0, "\(exported)")
        try Keychain(service: service).removeAll()
        let imported = try kc(["import"], input: exported.standardOutput)
        XCTAssertEqual(imported.status, 0, "\(imported)")
        letASecondPass()
        XCTAssertEqual(try Keychain(service: service).string(forKey: "k13d"), "v13")
        XCTAssertEqual(try Keychain(service: service).item("k13d")?.accessibility, .afterFirstUnlock)
        try assertDeadline(service, "k13d", is: long, after: "kc export | kc import (13d)")
        try assertDeadline(service, "k1h59m", is: medium, after: "kc export | kc import (1h59m)")
    }

    /// Another uid that shares the owner's session keyring (after su or runuser, with the
    /// user keyring linked in as a login links it) must not plant a deadline record that
    /// a later rename or export would trust.
    func testAnotherUserInTheSessionCannotPlantADeadlineRecord() throws {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root to run a second user (\(UnprivilegedUser.name))") }
        let service = uniqueService()
        XCTAssertEqual(try keyctl("link", "@u", "@s").status, 0)
        defer { _ = try? keyctl("unlink", "@u", "@s") }
        try Keychain(service: service, accessibility: .afterFirstUnlock, timeout: .seconds(13 * 86400)).set("v", forKey: "k")
        let serial = try XCTUnwrap(Keychain(service: service).item("k")?.serial.rawValue)
        let ring = try keyctl("search", "@u", "keyring", "kc.expiry").output.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertFalse(ring.isEmpty, "kc recorded the deadline")
        let planted = try runCommand("/usr/sbin/runuser", ["-u", UnprivilegedUser.name, "--", "keyctl", "add", "user", String(serial), "99999999999", ring])
        XCTAssertNotEqual(planted.status, 0, "the other user was refused: \(planted)")
        let deadline = try XCTUnwrap(Keychain(service: service).deadline(forKey: "k"))
        XCTAssertLessThanOrEqual(deadline.secondsLeft, 13 * 86400, "the deadline is the owner's")
    }

    /// The item serials the records in `kc.expiry` name, by record. An expired record
    /// cannot be described: it shows as naming nothing (nil).
    private func recordedItems() -> [KeySerial: Int32?] {
        guard let table = keyctlSearch("@u", "keyring", "kc.expiry").flatMap(Int32.init),
              let records = try? KeySerial(rawValue: table).linkedKeys()
        else { return [:] }
        var named: [KeySerial: Int32?] = [:]
        for record in records { named[record] = (try? record.describe().description.text).flatMap { $0.flatMap { Int32($0) } } }
        return named
    }

    /// The records linked in `kc.expiry` that name one of `items`, or that kc made for
    /// them (`records`, by serial: linked still, even expired).
    private func records(of items: some Sequence<Int32>, among records: [KeySerial: Int32?]? = nil) -> Set<KeySerial> {
        let items = Set(items)
        return Set((records ?? recordedItems()).filter { $0.value.map(items.contains) ?? false }.keys)
    }

    /// Each timed save makes a new key with a record of its own: the old key's record
    /// must go with it, and the last one with the item, or an ordinary user's 200-key
    /// quota fills with records. Counted for this item's keys only: other tests' timed
    /// writes add and unlink records of their own meanwhile.
    func testTimedSavesAndRemovalLeaveNoDeadlineRecordsBehind() throws {
        let keychain = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock, timeout: .seconds(3600))
        var keys: [Int32] = []
        func save(_ body: () throws -> Void) throws {
            try body()
            keys.append(try XCTUnwrap(keychain.item("k")?.serial.rawValue))
        }
        try save { try keychain.set("v0", forKey: "k") }
        for round in 1...5 { try save { XCTAssertTrue(try keychain.replace(Array("v\(round)".utf8), forKey: "k")) } }
        for round in 6...8 { try save { try keychain.set("v\(round)", forKey: "k") } }
        XCTAssertEqual(records(of: keys).count, 1, "one record for the one timed item")
        XCTAssertTrue(try keychain.remove("k"))
        XCTAssertEqual(records(of: keys), [], "its record went with it")
    }

    /// Makes timed writes until one of them finds the deadline table holding at least
    /// the number of records that makes a timed write unlink the records of gone items
    /// (16): the timed items (each of `keychain`, named `filler0`...) it leaves are live.
    private func fillDeadlineTable(with keychain: Keychain) throws {
        for index in 0...16 {
            try keychain.set("filler", forKey: "filler\(index)")
            if recordedItems().count > 16 { break }
        }
    }

    /// The records of items that expired are unlinked by a timed write once the table
    /// holds 16 records, before the records themselves expire: else each would stay
    /// charged to the user's key quota until its deadline and then until the kernel's
    /// collector takes it (`kernel.keys.gc_delay`, five minutes), and the collector's
    /// prune would keep 4 bytes of its link charged for as long as `kc.expiry` lives.
    func testRecordsOfExpiredItemsAreUnlinkedOnceTheTableFills() throws {
        let shortLived = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock, timeout: .seconds(1))
        var recorded: Set<KeySerial> = []
        for index in 0..<10 {
            try shortLived.set("gone soon", forKey: "k\(index)")
            let item = try XCTUnwrap(shortLived.item("k\(index)")?.serial.rawValue)
            recorded.formUnion(records(of: [item]))
        }
        XCTAssertEqual(recorded.count, 10, "each item was recorded")
        sleep(2)  // the items expire after 1 s, their records 2 s later

        let later = try Keychain(service: uniqueService(), accessibility: .afterFirstUnlock, timeout: .seconds(3600))
        try later.set("stays", forKey: "k")
        try fillDeadlineTable(with: later)
        XCTAssertEqual(Set(recordedItems().keys).intersection(recorded), [], "a timed write unlinked the record of every expired item")
        XCTAssertEqual(later["k"], "stays")
        _ = try? shortLived.removeAll()
        _ = try? later.removeAll()
    }

    /// A record goes with its item however the item goes, not only at its deadline: an
    /// item another tool invalidated, revoked or unlinked, and a login's item whose
    /// session keyring was revoked at logout, as pam_keyinit does (issue 35: each login
    /// left its timed items' records behind until their deadlines, and about 60 logins
    /// filled an ordinary user's key quota).
    func testRecordsOfItemsGoneBeforeTheirDeadlineAreUnlinkedOnceTheTableFills() throws {
        // A login's item and its record (their serials printed), then its session
        // keyring revoked at logout.
        let login = try runShell("""
            keyctl session - sh -c '
                printf v | "\(builtKC)" set --timeout 1h \(uniqueService("login")) k || exit 1
                item=$(keyctl search @s user k) && echo "$item"
                keyctl search "$(keyctl search @u keyring kc.expiry)" user "$item"
                keyctl revoke @s' 2>/dev/null
            """)
        let serials = login.output.split(separator: "\n").compactMap { Int32($0) }
        XCTAssertEqual(serials.count, 2, "the login's item was recorded: \(login)")
        var gone = Array(serials.prefix(1))
        var recorded = Set(serials.dropFirst().map { KeySerial(rawValue: $0) })
        let service = uniqueService()
        let keychain = try Keychain(service: service, accessibility: .afterFirstUnlock, timeout: .seconds(3600))
        for name in ["invalidated", "revoked", "unlinked"] {
            try keychain.set("v", forKey: name)
            let item = try XCTUnwrap(keychain.item(name)?.serial.rawValue)
            gone.append(item)
            recorded.formUnion(records(of: [item]))
        }
        XCTAssertEqual(recorded.count, 4, "each item was recorded")
        let ring = try XCTUnwrap(keyctlSearch("@u", "keyring", "kc:" + service))
        XCTAssertEqual(try keyctl("invalidate", String(gone[1])).status, 0)
        XCTAssertEqual(try keyctl("revoke", String(gone[2])).status, 0)
        XCTAssertEqual(try keyctl("unlink", String(gone[3]), ring).status, 0)
        // The kernel collects a key that lost its last link a moment later.
        let collected = Date().addingTimeInterval(2)
        while Date() < collected, gone.contains(where: { (try? KeySerial(rawValue: $0).describe()) != nil }) { usleep(50_000) }

        try keychain.set("stays", forKey: "k")
        try fillDeadlineTable(with: keychain)
        let now = recordedItems()
        XCTAssertEqual(Set(now.keys).intersection(recorded), [], "a timed write unlinked the records of the items gone")
        XCTAssertEqual(records(of: [try XCTUnwrap(keychain.item("k")?.serial.rawValue)], among: now).count, 1, "and kept the live item's")
        XCTAssertEqual(keychain["k"], "stays")
        _ = try? keychain.removeAll()
    }
}
