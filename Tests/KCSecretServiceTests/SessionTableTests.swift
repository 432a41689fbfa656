@testable import KCSecretService
import XCTest

/// The session table in-process: a new session is never refused, and the table stays
/// bounded by closing the least recently used session of the connection that opens
/// one, or, at the bound on all sessions, of the connection that holds the most.
final class SessionTableTests: XCTestCase {
    func testAConnectionAtItsLimitLosesItsLeastRecentlyUsedSession() {
        var table = SessionTable(perConnection: 3, total: 100)
        XCTAssertEqual(table.open("s1", owner: ":1.1", key: nil), [])
        XCTAssertEqual(table.open("s2", owner: ":1.1", key: nil), [])
        XCTAssertEqual(table.open("s3", owner: ":1.1", key: nil), [])
        XCTAssertNotNil(table.use("s1", by: ":1.1"), "s1 is used: s2 is now the least recently used")
        XCTAssertEqual(table.open("s4", owner: ":1.1", key: nil), ["s2"])
        XCTAssertNil(table.use("s2", by: ":1.1"))
        XCTAssertEqual(table.count(of: ":1.1"), 3)
        XCTAssertEqual(table.open("s5", owner: ":1.1", key: nil), ["s3"])
        XCTAssertEqual(table.open("other", owner: ":1.2", key: nil), [], "another connection has its own limit")
        XCTAssertEqual(table.count, 4)
    }

    func testAtTheBoundOnAllSessionsTheConnectionHoldingTheMostLosesOne() {
        var table = SessionTable(perConnection: 4, total: 6)
        _ = table.open("quiet", owner: ":1.quiet", key: nil)
        for n in 1...4 { _ = table.open("flood-a\(n)", owner: ":1.a", key: nil) }
        _ = table.open("flood-b1", owner: ":1.b", key: nil)
        XCTAssertEqual(table.count, 6)
        XCTAssertEqual(table.open("flood-b2", owner: ":1.b", key: nil), ["flood-a1"], "the fullest connection's oldest session")
        XCTAssertEqual(table.open("flood-b3", owner: ":1.b", key: nil), ["flood-a2"])
        // Now :1.a and :1.b hold 2 and 3: :1.b is the fullest, even for its own new session.
        XCTAssertEqual(table.open("flood-b4", owner: ":1.b", key: nil), ["flood-b1"])
        XCTAssertNotNil(table.use("quiet", by: ":1.quiet"), "the quiet connection's one session stays")
        XCTAssertEqual(table.count, 6)
    }

    func testOfConnectionsHoldingAsManyTheOneWithTheOldestSessionLosesIt() {
        var table = SessionTable(perConnection: 4, total: 4)
        _ = table.open("a1", owner: ":1.a", key: nil)
        _ = table.open("b1", owner: ":1.b", key: nil)
        _ = table.open("a2", owner: ":1.a", key: nil)
        _ = table.open("b2", owner: ":1.b", key: nil)
        XCTAssertNotNil(table.use("a1", by: ":1.a"))
        XCTAssertEqual(table.open("c1", owner: ":1.c", key: nil), ["b1"], "b1 is the least recently used of the two fullest")
    }

    func testASessionServesOnlyItsOwnConnectionAndClosesWithIt() {
        var table = SessionTable()
        _ = table.open("s1", owner: ":1.1", key: [1, 2, 3])
        _ = table.open("s2", owner: ":1.1", key: nil)
        _ = table.open("s3", owner: ":1.2", key: nil)
        XCTAssertNil(table.use("s1", by: ":1.2"), "another connection cannot use it")
        XCTAssertEqual(table.use("s1", by: ":1.1")?.key, [1, 2, 3])
        XCTAssertEqual(table.owner(of: "s1"), ":1.1")
        table.closeAll(of: ":1.1")
        XCTAssertNil(table.owner(of: "s1"))
        XCTAssertNil(table.owner(of: "s2"))
        XCTAssertEqual(table.count(of: ":1.1"), 0)
        XCTAssertEqual(table.count, 1)
        table.close("s3")
        table.close("s3")
        XCTAssertEqual(table.count, 0)
    }

    func testTenThousandSessionsOnOneConnectionKeepTheTableAtItsLimit() {
        var table = SessionTable(perConnection: 64, total: 4096)
        var closed = 0
        for n in 0..<10_000 {
            closed += table.open("s\(n)", owner: ":1.1", key: [UInt8](repeating: 7, count: 16)).count
            XCTAssertNotNil(table.use("s\(n)", by: ":1.1"))
        }
        XCTAssertEqual(table.count, 64)
        XCTAssertEqual(closed, 10_000 - 64)
        XCTAssertNotNil(table.owner(of: "s9999"))
        XCTAssertNil(table.owner(of: "s9935"))
    }
}
