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
        guard getuid() == 0 else { throw XCTSkip("binding /dev/log needs root") }
        guard !FileManager.default.fileExists(atPath: ReadAudit.journalSocket) else {
            throw XCTSkip("a journal listens here (\(ReadAudit.journalSocket)); kc logs there, not to /dev/log")
        }
        var info = stat()
        guard lstat("/dev/log", &info) != 0 else { throw XCTSkip("/dev/log already exists and is not this test's") }
        let made = try DatagramReceiver(address: "/dev/log")
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
