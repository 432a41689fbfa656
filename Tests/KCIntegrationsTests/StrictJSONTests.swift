@testable import KCIntegrations
import XCTest

/// The JSON docker-credential-kc reads and writes, in-process: every input a client
/// could send is either read exactly or refused with a reason that quotes no secret.
final class StrictJSONTests: XCTestCase {
    private let credentialFields: Set<String> = ["ServerURL", "Username", "Secret"]

    private func fields(_ json: String, named wanted: Set<String>? = nil) throws(StrictJSON.SyntaxError) -> [String: String] {
        try StrictJSON.stringFields(of: Array(json.utf8), named: wanted ?? credentialFields)
            .mapValues { String(decoding: $0, as: UTF8.self) }
    }

    private func reason(_ json: String) -> String? {
        reason(Array(json.utf8))
    }

    private func reason(_ json: [UInt8]) -> String? {
        do {
            _ = try StrictJSON.stringFields(of: json, named: credentialFields)
            return nil
        } catch {
            return error.reason
        }
    }

    /// Each input is refused for the reason paired with it.
    private func assertRefusals(_ cases: [(input: String, reason: String)], line: UInt = #line) {
        for (input, expected) in cases {
            XCTAssertEqual(reason(input), expected, input, line: line)
        }
    }

    // MARK: Reading

    func testTheCredentialFieldsOfADockerStoreAreRead() throws {
        XCTAssertEqual(try fields(#"{"ServerURL":"https://index.docker.io/v1/","Username":"alice","Secret":"s3cret"}"#),
                       ["ServerURL": "https://index.docker.io/v1/", "Username": "alice", "Secret": "s3cret"])
        XCTAssertEqual(try fields(" \t\r\n{ \"Secret\" : \"x\" ,\n\"Username\":\"u\" }\n"), ["Secret": "x", "Username": "u"],
                       "white space around tokens, fields in any order")
        XCTAssertEqual(try fields("{}"), [:])
        XCTAssertEqual(try fields("{ }"), [:])
    }

    func testOtherFieldsMayHoldAnyJSONValueAndAreSkipped() throws {
        let json = #"{"ServerURL":"s","Extra":{"a":[true,null,-1.5e3,0,1E+2,2e-1,"x\"y",{}],"b":[]},"n":-0.5,"t":false,"Username":"u"}"#
        XCTAssertEqual(try fields(json), ["ServerURL": "s", "Username": "u"])
    }

    func testANullFieldIsAbsentAsEncodingJSONReadsIt() throws {
        XCTAssertEqual(try fields(#"{"ServerURL":"s","Username":null,"Secret":"x"}"#), ["ServerURL": "s", "Secret": "x"])
    }

    func testEscapesAreResolvedToTheirUTF8Bytes() throws {
        let json = #"{"Secret":"q\"b\\n\nt\tu\u00e9\ud83d\ude00/\/\b\f\r"}"#
        XCTAssertEqual(try fields(json)["Secret"], "q\"b\\n\nt\tu\u{e9}\u{1F600}//\u{8}\u{c}\r")
        XCTAssertEqual(try fields(#"{"Secret":"\u0041\u00E9\u20AC"}"#)["Secret"], "Aé€", "upper- and lower-case hex")
        XCTAssertEqual(try fields("{\"Secret\":\"é😀\"}")["Secret"], "é😀", "UTF-8 as it is")
    }

    /// Each input DockerCredentialTests.testBadInputIsRefusedAndLeavesTheStoredCredential
    /// sends through the helper.
    func testMalformedCredentialsAreRefusedWithTheByteWhereReadingStopped() {
        let url = "https://registry.example/v1/"
        assertRefusals([
            ("{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"lost", "unterminated string at the end"),
            ("{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"x\"} trailing", "unexpected text after the object at byte 78"),
            ("{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":1}", "Secret must be a string at byte 73"),
            ("{\"ServerURL\":\"\(url)\",\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"x\"}", "the field ServerURL appears twice at byte 57"),
            ("{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"a\u{1}b\"}", "a control character must be escaped in a string at byte 76"),
            ("[1, 2]", "expected '{' at byte 1"),
        ])
    }

    func testSyntaxErrorsAreRefused() {
        assertRefusals([
            ("", "expected '{' at the end"),
            ("{", "expected a field name in quotes at the end"),
            ("{\"Secret\"}", "expected ':' at byte 10"),
            ("{\"Secret\":\"x\",}", "expected a field name in quotes at byte 15"),
            ("{\"Secret\":\"x\" \"Username\":\"u\"}", "expected '}' at byte 15"),
            ("{Secret:\"x\"}", "expected a field name in quotes at byte 2"),
            ("{\"a\":01}", "expected '}' at byte 7"),
            ("{\"a\":1.}", "expected a digit at byte 8"),
            ("{\"a\":1e}", "expected a digit at byte 8"),
            ("{\"a\":-}", "expected a JSON value at byte 7"),
            ("{\"a\":tru}", "expected a JSON value at byte 6"),
            ("{\"a\":[1,]}", "expected a JSON value at byte 9"),
            ("{\"a\":[1 2]}", "expected ']' at byte 9"),
            ("{\"Secret\":\"x\"}{}", "unexpected text after the object at byte 15"),
            ("{\"Secret\":true}", "Secret must be a string at byte 11"),
            ("{\"Secret\":[\"x\"]}", "Secret must be a string at byte 11"),
        ])
    }

    func testBadEscapesAndSurrogatesAreRefused() {
        assertRefusals([
            (#"{"Secret":"\ud83d"}"#, #"a lone UTF-16 surrogate at byte 18"#),
            (#"{"Secret":"\ud83dx"}"#, #"a lone UTF-16 surrogate at byte 18"#),
            (#"{"Secret":"\ud83d\u0041"}"#, #"a lone UTF-16 surrogate at byte 24"#),
            (#"{"Secret":"\ude00"}"#, #"a lone UTF-16 surrogate at byte 18"#),
            (#"{"Secret":"\u12"}"#, #"an invalid \u escape at byte 14"#),
            (#"{"Secret":"\u+123"}"#, #"an invalid \u escape at byte 14"#),
            (#"{"Secret":"\u-123"}"#, #"an invalid \u escape at byte 14"#),
            (#"{"Secret":"\uzzzz"}"#, #"an invalid \u escape at byte 14"#),
            (#"{"Secret":"\x"}"#, #"an invalid backslash escape at byte 14"#),
            (#"{"Secret":"x\"#, #"unterminated string at the end"#),
        ])
    }

    func testAStringThatIsNotUTF8IsRefused() {
        let json = Array(#"{"Secret":""#.utf8) + [0x61, 0xff, 0x62] + Array(#""}"#.utf8)
        XCTAssertEqual(reason(json), "a string is not valid UTF-8 at byte 16")
        let escaped = Array(#"{"a":"\u0041"#.utf8) + [0xc3] + Array(#"","Secret":"x"}"#.utf8)
        XCTAssertEqual(reason(escaped), "a string is not valid UTF-8 at byte 15", "in a skipped field too")
    }

    func testNestingIsLimitedSoNoInputExhaustsTheStack() {
        let deep = "{\"a\":" + String(repeating: "[", count: 65) + String(repeating: "]", count: 65) + "}"
        XCTAssertEqual(reason(deep), "nesting too deep at byte 70")
        let fine = "{\"a\":" + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}"
        XCTAssertNil(reason(fine))
    }

    /// The reason goes to the client, which shows or logs it: it names what is wrong,
    /// never a character of the secret (DockerCredentialTests.testAnErrorInTheSecretDoesNotQuoteTheSecret).
    func testAnErrorInTheSecretDoesNotQuoteTheSecret() {
        for secret in [#"hunter\q7"#, #"hunter\Z7"#, #"hunter\%7"#] {
            let refused = reason("{\"ServerURL\":\"s\",\"Username\":\"alice\",\"Secret\":\"\(secret)\"}")
            XCTAssertEqual(refused, "an invalid backslash escape at byte 55", secret)
            XCTAssertFalse(refused?.contains(String(secret.dropFirst(7).prefix(1))) ?? true, "\(secret): \(refused ?? "")")
        }
    }

    // MARK: Writing

    private func written(_ bytes: [UInt8]) -> String? {
        var output: [UInt8] = []
        guard StrictJSON.appendString(bytes, to: &output) else {
            XCTAssertEqual(output, [], "nothing appended")
            return nil
        }
        return String(decoding: output, as: UTF8.self)
    }

    func testTheWriterEscapesWhatJSONRequiresAndNothingElse() {
        XCTAssertEqual(written(Array("plain/text é😀".utf8)), "\"plain/text é😀\"", "slashes and UTF-8 as they are")
        XCTAssertEqual(written(Array("q\"b\\s".utf8)), #""q\"b\\s""#)
        XCTAssertEqual(written([0x0A, 0x0D, 0x09]), #""\n\r\t""#)
        XCTAssertEqual(written([0x00, 0x01, 0x08, 0x0C, 0x1F, 0x7F]), #""\u0000\u0001\u0008\u000c\u001f\u007f""#)
        XCTAssertEqual(written([]), "\"\"")
    }

    func testTheWriterRefusesBytesThatAreNotUTF8() {
        XCTAssertNil(written([0x61, 0xff]))
        XCTAssertNil(written([0xed, 0xa0, 0x80]), "an encoded surrogate is not UTF-8")
        var output = Array("{".utf8)
        XCTAssertFalse(StrictJSON.appendString([0xfe], to: &output))
        XCTAssertEqual(output, Array("{".utf8), "what came before is kept as it was")
    }

    func testEveryStringTheWriterWritesReadsBackTheSame() throws {
        var samples: [[UInt8]] = [Array(0...0x7F), Array("é€😀\u{10FFFF}".utf8), [], Array(#"\u0041"#.utf8)]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let scalars = (0..<Int.random(in: 0...20, using: &generator)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &generator))
            }
            samples.append(Array(String(String.UnicodeScalarView(scalars)).utf8))
        }
        for sample in samples {
            var json = Array(#"{"Secret":"#.utf8)
            XCTAssertTrue(StrictJSON.appendString(sample, to: &json))
            json.append(UInt8(ascii: "}"))
            XCTAssertEqual(try StrictJSON.stringFields(of: json, named: ["Secret"])["Secret"], sample)
        }
    }
}
