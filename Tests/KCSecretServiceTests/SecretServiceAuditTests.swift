import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Every secret kc-secretd sends goes to the read audit with the reader's pid, uid and
/// executable; never the value. There is no journald here, so the test listens on
/// /dev/log itself, as ReadAuditTests do.
final class SecretServiceAuditTests: KeyringTestCase {
    private var receiver: DatagramReceiver?

    override func tearDownWithError() throws {
        receiver?.close()
        receiver = nil
        try super.tearDownWithError()
    }

    private func listenAsSyslog() throws -> DatagramReceiver {
        let made = try DatagramReceiver.listenAsSyslog()
        receiver = made
        return made
    }

    func testEachSecretSentIsAuditedWithItsReaderButNoValue() throws {
        guard programExists("secret-tool") else { throw XCTSkip("no secret-tool (Debian's libsecret-tools)") }
        let log = try listenAsSyslog()
        let bus = try SessionBus()
        defer { bus.stop() }
        let service = uniqueService()
        let secret = "s3cret-VALUE-never-logged"
        let stored = try bus.run("/usr/bin/secret-tool", ["store", "--label", "audited", "service", service, "username", "alice"], input: Array(secret.utf8))
        XCTAssertEqual(stored.status, 0, stored.description)
        // The shell execs secret-tool, so its pid is the reader's.
        let read = try bus.script("echo $$ >&2; exec secret-tool lookup service '\(service)' username alice")
        XCTAssertEqual(read.output, secret)
        let readerPID = read.standardError.split(separator: "\n").first.map(String.init) ?? "?"
        let line = try XCTUnwrap(log.receive(within: 5) { $0.contains("service=\(service)") }, "an audit line arrives")
        XCTAssertTrue(line.hasSuffix("read service=\(service) item=alice pid=\(readerPID) uid=\(getuid()) exe=/usr/bin/secret-tool via=secret-service"), line)
        XCTAssertFalse(line.contains(secret))
        XCTAssertNil(log.receive(within: 0.3) { $0.contains(service) }, "one line per secret sent")

        // --no-audit turns it off.
        bus.stop()
        let quiet = try SessionBus(arguments: ["--no-audit"])
        defer { quiet.stop() }
        XCTAssertEqual(try quiet.run("/usr/bin/secret-tool", ["lookup", "service", service, "username", "alice"]).output, secret)
        XCTAssertNil(log.receive(within: 0.5) { $0.contains(service) }, "no line with --no-audit")
        _ = try Keychain(service: service).remove("alice")
    }

    /// A log that stopped reading (its socket buffer full) loses lines; it never stops
    /// the daemon, which serves every client on one thread.
    func testALogThatStoppedReadingDoesNotStopTheDaemon() throws {
        guard programExists("secret-tool") else { throw XCTSkip("no secret-tool (Debian's libsecret-tools)") }
        _ = try listenAsSyslog()  // bound, and never read
        let bus = try SessionBus()
        defer { bus.stop() }
        let service = uniqueService()
        let stored = try bus.run("/usr/bin/secret-tool", ["store", "--label", "l", "service", service, "username", "alice"], input: Array("v".utf8))
        XCTAssertEqual(stored.status, 0, stored.description)
        // Far more lines than a datagram socket's buffer holds; each lookup has 10 s.
        let looked = try bus.script("for i in $(seq 60); do timeout 10 secret-tool lookup service '\(service)' username alice || echo FAILED; done")
        XCTAssertEqual(looked.output, String(repeating: "v", count: 60), looked.description)
        _ = try Keychain(service: service).remove("alice")
    }
}
