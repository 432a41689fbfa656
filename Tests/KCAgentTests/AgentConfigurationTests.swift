import Foundation
@testable import KCAgent
import KernelKeychain
import XCTest

/// kc-agent's configuration: every mistake a user can make in the file is named by its
/// place, in one line, before the agent contacts anything.
final class AgentConfigurationTests: XCTestCase {
    private func parse(_ json: String) throws -> AgentConfiguration {
        try AgentConfiguration.parse(Array(json.utf8))
    }

    private func problem(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            _ = try parse(json)
            XCTFail("accepted: \(json)", file: file, line: line)
            return ""
        } catch {
            let text = "\(error)"
            XCTAssertFalse(text.contains("\n"), "one line: \(text)", file: file, line: line)
            return text
        }
    }

    private let auth = #""auth": {"method": "approle", "service": "openbao"}"#

    func testAWholeConfigurationReadsAsWritten() throws {
        let configuration = try parse("""
        {"addresses": ["https://a:8200", "https://b:8200/"], \(auth), "poll_interval": "250ms",
         "kv": [{"secret": "secret/app", "service": "com.app"},
                {"secret": "team/kv/db", "mount": "team/kv", "service": "com.db", "access": "always+this-device-only"}],
         "leases": [{"path": "pki/issue/web", "data": {"common_name": "web.example"}, "service": "web.tls"}]}
        """)
        XCTAssertEqual(configuration.addresses, ["https://a:8200", "https://b:8200/"])
        XCTAssertEqual(configuration.pollInterval, .milliseconds(250))
        XCTAssertEqual(configuration.auth, .appRole(mount: "approle", service: "openbao", level: .afterFirstUnlock))
        XCTAssertEqual(configuration.kv.map(\.mount), ["secret", "team/kv"])
        XCTAssertEqual(configuration.kv.map(\.path), ["app", "db"])
        XCTAssertEqual(configuration.kv[1].level, .alwaysThisDeviceOnly)
        XCTAssertEqual(configuration.leases[0].method, "POST", "a request with data is a POST")
        XCTAssertEqual(configuration.leases[0].level, .afterFirstUnlock, "where a user service's items reach every login")
    }

    func testEachMistakeIsNamedByItsPlace() {
        XCTAssertTrue(problem("[]").contains("not a JSON object"))
        XCTAssertTrue(problem("{\(auth), \"kv\": []}").contains("no \"address\""))
        XCTAssertTrue(problem(#"{"address": "http://bao:8200", \#(auth), "kv": [{"secret": "secret/a", "service": "s"}]}"#)
            .hasPrefix("address: 'http://bao:8200' is plain HTTP"))
        XCTAssertTrue(problem(#"{"address": "bao:8200", \#(auth), "kv": [{"secret": "secret/a", "service": "s"}]}"#)
            .contains("is not an https:// address"))
        XCTAssertTrue(problem(#"{"address": "https://b", "kv": [{"secret": "secret/a", "service": "s"}]}"#).contains("no \"auth\""))
        XCTAssertTrue(problem(#"{"address": "https://b", "auth": {"method": "ldap"}, "kv": [{"secret": "secret/a", "service": "s"}]}"#)
            .hasPrefix("auth.method: 'ldap' is not a method"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth)}"#).contains("nothing to sync"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "app", "service": "s"}]}"#)
            .hasPrefix("kv[0].secret: 'app' names no secret below a mount"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/../sys", "service": "s"}]}"#)
            .hasPrefix("kv[0].secret: 'secret/../sys' is not an API path"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a", "service": "a/b"}]}"#)
            .hasPrefix("kv[0].service: invalid service name"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a"}]}"#)
            .hasPrefix("kv[0]: no \"service\""))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a", "service": "s", "acess": "always"}]}"#)
            .hasPrefix("kv[0].acess: is not a setting kc-agent knows here"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a", "service": "s", "access": "forever"}]}"#)
            .hasPrefix("kv[0].access: 'forever' is not a level"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a", "service": "s"}, {"secret": "secret/b", "service": "s"}]}"#)
            .hasPrefix("kv[1].service: 's' is also kv[0]'s service"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "kv": [{"secret": "secret/a", "service": "openbao"}]}"#)
            .hasPrefix("kv[0].service: 'openbao' is also auth's service"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "poll_interval": "1ms", "kv": [{"secret": "secret/a", "service": "s"}]}"#)
            .hasPrefix("poll_interval: '1ms' is not an interval"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "ca_file": "/nonexistent/ca.pem", "kv": [{"secret": "secret/a", "service": "s"}]}"#)
            .hasPrefix("ca_file: cannot read '/nonexistent/ca.pem'"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "leases": [{"path": "pki/issue/web", "method": "DELETE", "service": "s"}]}"#)
            .hasPrefix("leases[0].method: 'DELETE' is not GET, POST or PUT"))
        XCTAssertTrue(problem(#"{"address": "https://b", \#(auth), "leases": [{"path": "pki/issue/web", "data": [1], "service": "s"}]}"#)
            .hasPrefix("leases[0].data: must be a JSON object"))
    }

    /// The file that says where the secret id goes, and the CA that says whom to trust,
    /// must be the caller's (or root's) and writable by no one else.
    func testAFileAnotherUserCouldChangeIsRefused() throws {
        let folder = NSTemporaryDirectory() + "kc-agent-config-\(getpid())-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/agent.json"
        let ca = folder + "/ca.pem"
        XCTAssertTrue(FileManager.default.createFile(atPath: ca, contents: Data("-----BEGIN CERTIFICATE-----\n".utf8)))
        let json = #"{"address": "https://b", "ca_file": "\#(ca)", \#(auth), "kv": [{"secret": "secret/a", "service": "s"}]}"#
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(json.utf8)))
        XCTAssertEqual(chmod(path, 0o600), 0)
        XCTAssertEqual(chmod(ca, 0o644), 0)
        XCTAssertNoThrow(try AgentConfiguration.load(path: path))
        XCTAssertEqual(chmod(path, 0o666), 0)
        XCTAssertThrowsError(try AgentConfiguration.load(path: path)) { error in
            XCTAssertTrue("\(error)".contains("is writable by its group or by others"), "\(error)")
        }
        XCTAssertEqual(chmod(path, 0o600), 0)
        XCTAssertEqual(chmod(ca, 0o664), 0)
        XCTAssertThrowsError(try AgentConfiguration.load(path: path)) { error in
            XCTAssertTrue("\(error)".hasPrefix("ca_file: '\(ca)' is writable by its group or by others"), "\(error)")
        }
        if getuid() == 0 {
            XCTAssertEqual(chmod(ca, 0o644), 0)
            XCTAssertEqual(chown(path, 65534, 65534), 0)
            XCTAssertThrowsError(try AgentConfiguration.load(path: path)) { error in
                XCTAssertTrue("\(error)".contains("belongs to uid 65534, not to you or root"), "\(error)")
            }
        }
    }

    func testAValueBecomesTheBytesAProgramExpects() {
        XCTAssertEqual(JSONValue.string("héllo").itemBytes, Array("héllo".utf8))
        XCTAssertEqual(JSONValue.array([.string("-----A-----"), .string("-----B-----")]).itemBytes, Array("-----A-----\n-----B-----".utf8))
        XCTAssertEqual(JSONValue.integer(42).itemBytes, Array("42".utf8))
        XCTAssertEqual(JSONValue.object(["b": .bool(true), "a": .null]).itemBytes, Array(#"{"a":null,"b":true}"#.utf8))
    }

    /// A KV secret's keys are item names, which are bytes: two keys that differ only in
    /// their Unicode normalization (composed and decomposed `café`) are two members and
    /// become two items, where a `String`-keyed dictionary kept one of them.
    func testKeysThatDifferOnlyInNormalizationStayTwo() throws {
        let composed = "caf\u{e9}", decomposed = "cafe\u{301}"
        let document = Array(#"{"data":{"data":{"\#(composed)":"one","\#(decomposed)":"two","plain":"3"}}}"#.utf8)
        let members = try XCTUnwrap(JSONValue.decode(document)?["data"]?["data"]?.object)
        XCTAssertEqual(members.count, 3)
        XCTAssertEqual(members[JSONKey(bytes: Array(composed.utf8))], .string("one"))
        XCTAssertEqual(members[JSONKey(bytes: Array(decomposed.utf8))], .string("two"))
        XCTAssertEqual(members.keys.sorted().map(\.bytes), [Array(decomposed.utf8), Array(composed.utf8), Array("plain".utf8)],
                       "in byte order, as items are listed")
        // And back out, byte for byte, members sorted by their bytes.
        let written = JSONValue.object(members).encoded()
        XCTAssertEqual(JSONValue.decode(written), .object(members))
    }

    /// The reader takes JSON as RFC 8259 has it and nothing else.
    func testTheReaderReadsJSONExactly() {
        XCTAssertEqual(JSONValue.decode(Array(#" {"a":[1,-2.5e1,true,false,null,"\u00e9\ud83d\ude00\n"]} "#.utf8)),
                       .object(["a": .array([.integer(1), .number(-25), .bool(true), .bool(false), .null, .string("é😀\n")])]))
        XCTAssertEqual(JSONValue.decode(Array("9223372036854775808".utf8)), .number(9_223_372_036_854_775_808))
        XCTAssertEqual(JSONValue.decode(Array(#"{"k":1,"k":2}"#.utf8)), .object(["k": .integer(2)]), "the later of a name given twice")
        for malformed in ["", "{", "[1,]", "01", "1.", "\"a", #""\u12""#, #""\ud800""#, "{\"a\" 1}", "tru", "[1] x",
                          "\"tab\there\"", String(repeating: "[", count: 600) + String(repeating: "]", count: 600)] {
            XCTAssertNil(JSONValue.decode(Array(malformed.utf8)), malformed)
        }
        XCTAssertNil(JSONValue.decode([0x22, 0xff, 0x22]), "not UTF-8")
        XCTAssertEqual(JSONValue.string("q\"\\\u{1}").encoded(), Array(#""q\"\\\u0001""#.utf8))
    }

    /// A TTL or lease of any size a server sends is held to what a kernel timeout says,
    /// so no arithmetic on it overflows (the review's server sent Int64.max).
    func testAnyTTLIsHeldToWhatTheKernelCanSay() {
        XCTAssertEqual(JSONValue.integer(Int64.max).seconds, JSONValue.longestSeconds)
        XCTAssertEqual(JSONValue.integer(-5).seconds, 0)
        XCTAssertEqual(JSONValue.string("3600").seconds, 3600)
        XCTAssertEqual(JSONValue.number(1e300).seconds, nil)
    }

    /// One outage reads the same at every poll: libcurl's elapsed time is left out.
    func testAnOutageMessageHasNoTiming() {
        XCTAssertEqual(HTTPTransport.withoutTiming("Failed to connect to 127.0.0.1 port 8200 after 3 ms: Couldn't connect to server"),
                       "Failed to connect to 127.0.0.1 port 8200: Couldn't connect to server")
        XCTAssertEqual(HTTPTransport.withoutTiming("Connection timed out after 2001 milliseconds"),
                       "Connection timed out after 2001 milliseconds")
    }
}
