import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `kc mount --audit` and `KC_AUDIT=1 kc get`: one line per read, naming the reader
/// and the item, never the value. There is no journald here, so each test listens on
/// /dev/log itself (a real datagram socket, as syslog's) or, for the journal's native
/// protocol, on /run/systemd/journal/socket.
final class ReadAuditTests: KeyringTestCase {
    private var receiver: DatagramReceiver?
    private var madeJournalDirectory = false

    private let secret = "s3cret-VALUE-never-logged"

    override func tearDownWithError() throws {
        receiver?.close()
        receiver = nil
        if madeJournalDirectory {
            rmdir("/run/systemd/journal")
            madeJournalDirectory = false
        }
        try super.tearDownWithError()
    }

    /// Listens on /dev/log for the test's duration.
    private func listenAsSyslog() throws -> DatagramReceiver {
        let made = try DatagramReceiver.listenAsSyslog()
        receiver = made
        return made
    }

    /// Listens on journald's native socket for the test's duration.
    private func listenAsJournal() throws -> DatagramReceiver {
        guard getuid() == 0 else { throw XCTSkip("binding /run/systemd/journal/socket needs root") }
        var info = stat()
        guard lstat("/run/systemd/journal", &info) != 0 else { throw XCTSkip("/run/systemd/journal already exists and is not this test's") }
        guard mkdir("/run/systemd/journal", 0o755) == 0 else { throw XCTSkip("cannot create /run/systemd/journal: \(String(cString: strerror(errno)))") }
        madeJournalDirectory = true
        let made = try DatagramReceiver(address: ReadAudit.journalSocket)
        receiver = made
        return made
    }

    private func resolved(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    func testMountAuditLogsEachOpenWithReaderAndNamesButNoValue() throws {
        let log = try listenAsSyslog()
        let service = uniqueService()
        try Keychain(service: service).set(secret, forKey: "token")
        let mount = try MountFixture(options: ["--audit"])
        defer { mount.unmount() }
        // The shell's pid is cat's: it execs cat.
        let read = try runShell("echo $$ >&2; exec /bin/cat '\(mount.file(service, "token"))'")
        XCTAssertEqual(read.output, secret)
        let readerPID = read.standardError.trimmingCharacters(in: .whitespacesAndNewlines)
        let line = try XCTUnwrap(log.receive(within: 5) { $0.contains("item=token") }, "an audit line arrives")
        // <86>: facility authpriv (10), severity info (6).
        XCTAssertTrue(line.hasPrefix("<86>"), line)
        XCTAssertTrue(line.contains(" kc["), "ident kc: \(line)")
        XCTAssertTrue(line.hasSuffix("read service=\(service) item=token pid=\(readerPID) uid=\(getuid()) exe=\(resolved("/bin/cat")) via=mount"), line)
        XCTAssertFalse(line.contains(secret))
        XCTAssertNil(log.receive(within: 0.3) { $0.contains(service) }, "one line per open")
        // An open to write is logged too, as what it is.
        XCTAssertEqual(writeFile(mount.file(service, "token"), Array("new".utf8)), 0)
        let write = try XCTUnwrap(log.receive(within: 5) { $0.contains(service) })
        XCTAssertTrue(write.hasSuffix("write service=\(service) item=token pid=\(getpid()) uid=\(getuid()) exe=\(resolved("/proc/self/exe")) via=mount"), write)
    }

    func testMountAuditEscapesControlAndNonUTF8BytesInNames() throws {
        let log = try listenAsSyslog()
        let service = uniqueService()
        let item = KeyName(bytes: Array("a".utf8) + [0x01, 0xff] + Array("b c\\é".utf8))
        try Keychain(service: service).set(secret, forKey: item)
        let mount = try MountFixture(options: ["--audit"])
        defer { mount.unmount() }
        let path = Array(mount.file(service).utf8) + [UInt8(ascii: "/")] + item.bytes + [0]
        let fd = path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY) } }
        XCTAssertGreaterThanOrEqual(fd, 0, String(cString: strerror(errno)))
        close(fd)
        let line = try XCTUnwrap(log.receive(within: 5) { $0.contains(service) })
        XCTAssertTrue(line.contains("item=a\\x01\\xffb\\x20c\\x5cé pid=\(getpid()) "), line)
        XCTAssertFalse(line.utf8.contains { $0 < 0x20 }, "no control byte in the line")
    }

    /// A name may hold any bytes, and valid UTF-8 can still break a line or forge a
    /// field for the eye (NEL, U+2028, an em space before `uid=0`, a right-to-left
    /// override): only visible characters stay as they are.
    func testAuditNamesCannotBreakTheLineOrForgeAField() throws {
        let forged = "x\u{85}y\u{2028}z\u{2029}w\u{2003}uid=0\u{a0}v\u{202e}u\u{200b}t\u{feff}s\u{e000}é€😀"
        let escaped = ReadAudit.escaped(Array(forged.utf8))
        XCTAssertEqual(escaped, "x\\xc2\\x85y\\xe2\\x80\\xa8z\\xe2\\x80\\xa9w\\xe2\\x80\\x83uid=0\\xc2\\xa0v"
            + "\\xe2\\x80\\xaeu\\xe2\\x80\\x8bt\\xef\\xbb\\xbfs\\xee\\x80\\x80é€😀")
        let read = ItemRead(via: "kc-get", service: KeyName(forged), item: KeyName(forged), readerPID: 1, readerUID: 0)
        let line = ReadAudit.message(read, executable: Array("/tmp/a\u{2028}b".utf8))
        XCTAssertFalse(line.unicodeScalars.contains { [.control, .format, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory) }, line)
        XCTAssertEqual(line.split(separator: " ").count, 7, "seven fields, each one token: \(line)")
        XCTAssertFalse(line.unicodeScalars.contains { $0.properties.isWhitespace && $0 != " " }, line)
    }

    func testKCGetWithKCAuditLogsTheProgramThatRanIt() throws {
        let log = try listenAsSyslog()
        let service = uniqueService()
        try Keychain(service: service).set(secret, forKey: "token")
        let result = try runShell("echo $$ >&2; KC_AUDIT=1 '\(builtKC)' get '\(service)' token; true")
        XCTAssertEqual(result.output, secret)
        let shellPID = result.standardError.trimmingCharacters(in: .whitespacesAndNewlines)
        let line = try XCTUnwrap(log.receive(within: 5) { $0.contains(service) })
        XCTAssertTrue(line.hasPrefix("<86>"), line)
        XCTAssertTrue(line.contains(" kc["), "ident kc: \(line)")
        XCTAssertTrue(line.contains("read service=\(service) item=token pid=\(shellPID) uid=\(getuid()) exe=\(resolved("/bin/sh")) via=kc-get kc_pid="), line)
        XCTAssertFalse(line.contains(secret))
    }

    func testKCGetWithoutKCAuditLogsNothing() throws {
        let log = try listenAsSyslog()
        let service = uniqueService()
        try Keychain(service: service).set(secret, forKey: "token")
        XCTAssertEqual(try kc("get", service, "token").output, secret)
        let result = try runShell("KC_AUDIT=0 '\(builtKC)' get '\(service)' token")
        XCTAssertEqual(result.output, secret)
        XCTAssertNil(log.receive(within: 0.5) { $0.contains(service) })
    }

    func testWithAJournalTheLineGoesThereWithItsFields() throws {
        let journal = try listenAsJournal()
        let service = uniqueService()
        try Keychain(service: service).set(secret, forKey: "token")
        let result = try runShell("echo $$ >&2; KC_AUDIT=1 '\(builtKC)' get '\(service)' token; true")
        let shellPID = result.standardError.trimmingCharacters(in: .whitespacesAndNewlines)
        let entry = try XCTUnwrap(journal.receive(within: 5) { $0.contains(service) })
        let fields = entry.split(separator: "\n").map(String.init)
        XCTAssertTrue(fields.contains("MESSAGE=read service=\(service) item=token pid=\(shellPID) uid=\(getuid()) exe=\(resolved("/bin/sh")) via=kc-get kc_pid=" + (fields.first { $0.hasPrefix("KC_GET_PID=") }?.dropFirst(11) ?? "")), entry)
        for field in ["SYSLOG_IDENTIFIER=kc", "SYSLOG_FACILITY=10", "PRIORITY=6", "KC_SERVICE=\(service)", "KC_ITEM=token",
                      "KC_READER_PID=\(shellPID)", "KC_READER_UID=\(getuid())", "KC_READER_EXE=\(resolved("/bin/sh"))", "KC_VIA=kc-get"] {
            XCTAssertTrue(fields.contains(field), "\(field) in \(entry)")
        }
        XCTAssertFalse(entry.contains(secret))
    }
}
