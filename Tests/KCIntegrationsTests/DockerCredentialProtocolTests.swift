@testable import KCIntegrations
import Keyrings
import XCTest

/// docker-credential-kc's input and names, in-process: what a store is refused for
/// before any kernel call, how a server URL is read, and the service it becomes.
final class DockerCredentialProtocolTests: XCTestCase {
    private typealias Helper = DockerCredentialHelper

    private func storeFailure(_ json: String) -> String? {
        do {
            try Helper.store(Array(json.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    /// DockerCredentialTests.testBadInputIsRefusedAndLeavesTheStoredCredential, in-process.
    func testAStoreThatIsNotJSONIsRefusedWithOneLine() throws {
        let message = try XCTUnwrap(storeFailure(#"{"ServerURL":"s","Username":"alice","Secret":1}"#))
        XCTAssertEqual(message, #"kc: the credentials are not valid JSON (Secret must be a string at byte 46); expected {"ServerURL": ..., "Username": ..., "Secret": ...}"#)
        for input in ["", "[1, 2]", #"{"ServerURL":"s","Username":"alice","Secret":"lost"#, "{\"Secret\":\"a\u{1}b\"}"] {
            let refused = storeFailure(input) ?? ""
            XCTAssertTrue(refused.hasPrefix("kc: the credentials are not valid JSON ("), "\(input): \(refused)")
            XCTAssertFalse(refused.contains("\n"), "one line")
        }
    }

    func testAStoreWithoutServerUserOrSecretIsRefusedAsTheReferenceHelpersRefuseIt() {
        XCTAssertEqual(storeFailure(#"{"Username":"alice","Secret":"x"}"#), "no credentials server URL")
        XCTAssertEqual(storeFailure(#"{"ServerURL":"","Username":"alice","Secret":"x"}"#), "no credentials server URL")
        XCTAssertEqual(storeFailure(#"{"ServerURL":"s","Secret":"x","Extra":{"a":[true,null,-1.5e3]}}"#), "no credentials username")
        XCTAssertEqual(storeFailure(#"{"ServerURL":"s","Username":null,"Secret":"x"}"#), "no credentials username")
        XCTAssertEqual(storeFailure(#"{"ServerURL":"s\u0000x","Username":"alice","Secret":"x"}"#), "kc: the server URL holds a NUL character")
    }

    func testAServerOrUserTooLongForANameIsRefused() {
        let longServer = String(repeating: "/", count: 83)
        XCTAssertEqual(storeFailure(#"{"ServerURL":"\#(longServer)","Username":"alice","Secret":"x"}"#),
                       "kc: the server URL is too long for a service name (at most 248 bytes once '/' and '%' are escaped)")
        let longUser = String(repeating: "%", count: 86)
        XCTAssertEqual(storeFailure(#"{"ServerURL":"s","Username":"\#(longUser)","Secret":"x"}"#),
                       "kc: the user name is too long for an item name (at most 255 bytes once '/' and '%' are escaped)")
    }

    func testTheServerURLIsTrimmedAsTheReferenceHelpersTrimIt() throws {
        XCTAssertEqual(try Helper.serverURL(in: Array("  https://h/v1/\n\n".utf8)), Array("https://h/v1/".utf8))
        XCTAssertEqual(try Helper.serverURL(in: Array("\t127.0.0.1:5000\r\n".utf8)), Array("127.0.0.1:5000".utf8))
        XCTAssertEqual(try Helper.serverURL(in: Array("a b".utf8)), Array("a b".utf8), "space inside is kept")
        for blank in ["", "   \n", "\u{b}\u{c}\r\t"] {
            XCTAssertThrowsError(try Helper.serverURL(in: Array(blank.utf8))) { error in
                XCTAssertEqual((error as? Helper.Failure)?.message, "no credentials server URL")
            }
        }
    }

    func testEachServerIsAServiceNamedAfterItsURL() {
        XCTAssertEqual(Helper.serviceName(forServer: Array("127.0.0.1:5000".utf8)), "docker:127.0.0.1:5000")
        XCTAssertEqual(Helper.serviceName(forServer: Array("https://index.docker.io/v1/".utf8)), "docker:https:%2F%2Findex.docker.io%2Fv1%2F")
        XCTAssertNotNil(Helper.serviceName(forServer: Array(repeating: UInt8(ascii: "h"), count: 248)))
        XCTAssertNil(Helper.serviceName(forServer: Array(repeating: UInt8(ascii: "h"), count: 249)), "longer than 255 bytes")
        XCTAssertNil(Helper.serviceName(forServer: [0x61, 0x00]))
    }

    func testAMissingCredentialIsTheExactTextClientsLookFor() {
        XCTAssertEqual(Helper.notFound, "credentials not found in native keychain")
    }
}
