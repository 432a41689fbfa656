import Foundation
@testable import KCIntegrations
import KernelKeychain
import Keyrings
import XCTest

/// What `kc credential-server` reads from a connection, in-process: systemd's address
/// `\0<hex random>/unit/<unit>/<id>`, the peer's uid, and which uids are served.
final class CredentialRequestTests: XCTestCase {
    private func request(_ path: String) -> CredentialRequest? {
        CredentialRequest(peerPath: [0] + Array(path.utf8))
    }

    func testSystemdsAddressNamesTheUnitAndTheCredential() throws {
        let plain = try XCTUnwrap(request("5ad1b2c3d4e5f607/unit/foo.service/token"))
        XCTAssertEqual(plain.unit, "foo.service")
        XCTAssertEqual(plain.id, "token")
        let instance = try XCTUnwrap(request("0/unit/web@1.service/db.password"))
        XCTAssertEqual(instance.unit, "web@1.service")
        XCTAssertEqual(instance.id, "db.password")
        XCTAssertEqual(request("ffffffffffffffff/unit/a-b_c:d\\x2d.socket/x")?.unit, "a-b_c:d\\x2d.socket")
        XCTAssertEqual(CredentialRequest(peerPath: [0] + Array("a/unit/foo.service/".utf8) + [0xff])?.id, KeyName(bytes: [0xff]),
                       "an ID is bytes")
    }

    /// CredentialServerTests.testClientsWithoutSystemdsAddressGetNothingAndTheServerKeepsServing,
    /// in-process: each address that is not systemd's.
    func testAddressesThatAreNotSystemdsAreRefused() {
        let random = "5ad1b2c3d4e5f607"
        let refused: [[UInt8]] = [
            [],  // not bound: the kernel gives it no address
            [0],
            [0] + Array("\(random)/unit/foo.service".utf8),  // no ID
            [0] + Array("\(random)/unit/foo.service/token/extra".utf8),
            [0] + Array("xyz/unit/foo.service/token".utf8),  // random is not hex
            [0] + Array("5AD1/unit/foo.service/token".utf8),  // nor upper-case hex
            [0] + Array("/unit/foo.service/token".utf8),  // nor empty
            [0] + Array("0123456789abcdef0/unit/foo.service/token".utf8),  // nor longer than 16 digits
            [0] + Array("\(random)/user/foo.service/token".utf8),
            [0] + Array("\(random)/unit/foo/token".utf8),  // not a unit name
            [0] + Array("\(random)/unit/foo.service/..".utf8),
            [0] + Array("\(random)/unit/foo.service/.".utf8),
            [0] + Array("\(random)/unit/foo.service/".utf8),  // an empty ID
            [0] + Array("\(random)/unit/foo.service/tok".utf8) + [0] + Array("en".utf8),
            Array("/run/\(random)/unit/foo.service/token".utf8),  // a path, not abstract
        ]
        for path in refused {
            XCTAssertNil(CredentialRequest(peerPath: path), String(decoding: path, as: UTF8.self))
        }
    }

    func testUnitNamesFollowSystemdsRules() {
        for name in ["foo.service", "web@1.service", "a.socket", "dev-sda.device", "home.mount", "x.automount", "s.swap",
                     "multi-user.target", "p.path", "t.timer", "user.slice", "session-1.scope", "a\\x2db.service"] {
            XCTAssertTrue(CredentialRequest.isUnitName(Array(name.utf8)), name)
        }
        for name in ["foo", ".service", "foo.", "foo.unit", "foo.Service", "foo bar.service", "föo.service", "a/b.service",
                     "", "a.", String(repeating: "a", count: 248) + ".service"] {
            XCTAssertFalse(CredentialRequest.isUnitName(Array(name.utf8)), name)
        }
        XCTAssertTrue(CredentialRequest.isUnitName(Array((String(repeating: "a", count: 247) + ".service").utf8)), "255 bytes")
    }

    // MARK: The peer

    func testOnlyTheSystemManagerAndTheServersOwnUserAreServed() {
        XCTAssertTrue(CredentialPeer(pid: 1, uid: 0).isServed(byServerRunningAs: 1000))
        XCTAssertTrue(CredentialPeer(pid: 2, uid: 1000).isServed(byServerRunningAs: 1000))
        XCTAssertFalse(CredentialPeer(pid: 3, uid: 1001).isServed(byServerRunningAs: 1000))
        XCTAssertTrue(CredentialPeer(pid: 1, uid: 0).isServed(byServerRunningAs: 0))
        XCTAssertFalse(CredentialPeer(pid: 3, uid: 1000).isServed(byServerRunningAs: 0))
        XCTAssertEqual(CredentialPeer.servedUIDs(byServerRunningAs: 0), "uid 0 is")
        XCTAssertEqual(CredentialPeer.servedUIDs(byServerRunningAs: 1000), "uid 0 and uid 1000 are")
    }

    /// A real connection, as systemd makes it: the client bound to the abstract name,
    /// the server reading who and what from the accepted socket.
    func testTheRequestAndThePeerAreReadFromTheConnection() throws {
        let directory = NSTemporaryDirectory() + "kc-integrations-\(getpid())-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(directory, 0o700), 0)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/credentials.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = try XCTUnwrap(UnixSocketAddress(path))
        XCTAssertEqual(address.withSockaddr { bind(listener, $0, $1) }, 0, String(cString: strerror(errno)))
        XCTAssertEqual(listen(listener, 4), 0)

        func connectAndAccept(boundTo name: [UInt8]?) throws -> (client: Int32, accepted: Int32) {
            let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if let name {
                var local = try XCTUnwrap(UnixSocketAddress(rawPath: name, terminated: false))
                XCTAssertEqual(local.withSockaddr { bind(client, $0, $1) }, 0, String(cString: strerror(errno)))
            }
            XCTAssertEqual(address.withSockaddr { connect(client, $0, $1) }, 0, String(cString: strerror(errno)))
            let accepted = accept(listener, nil, nil)
            XCTAssertGreaterThanOrEqual(accepted, 0)
            return (client, accepted)
        }

        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let systemd = try connectAndAccept(boundTo: [0] + Array("\(random)/unit/web@1.service/db.password".utf8))
        defer { close(systemd.client); close(systemd.accepted) }
        XCTAssertEqual(CredentialRequest(connection: systemd.accepted)?.unit, "web@1.service")
        XCTAssertEqual(CredentialRequest(connection: systemd.accepted)?.id, "db.password")
        XCTAssertEqual(CredentialPeer(connection: systemd.accepted), CredentialPeer(pid: getpid(), uid: getuid()))

        let unbound = try connectAndAccept(boundTo: nil)
        defer { close(unbound.client); close(unbound.accepted) }
        XCTAssertNil(CredentialRequest(connection: unbound.accepted), "a client that did not bind has no address")
        XCTAssertNotNil(CredentialPeer(connection: unbound.accepted), "but its uid is known")

        XCTAssertNil(CredentialRequest(connection: listener), "a socket with no peer")
        XCTAssertNil(CredentialPeer(connection: -1))
    }

    // MARK: Which service

    func testAUnitIsServedFromItsOwnServiceElseTheDefault() {
        let served = ServedServices(fallback: "com.example.shared", units: ["web.service": "com.example.web"])
        XCTAssertEqual(served.service(for: "web.service"), "com.example.web")
        XCTAssertEqual(served.service(for: "other.service"), "com.example.shared")
        let onlyUnits = ServedServices(fallback: nil, units: ["web.service": "com.example.web"])
        XCTAssertNil(onlyUnits.service(for: "other.service"), "no service for a unit nobody named")
    }
}
