@testable import KCIntegrations
import Keyrings
import XCTest

/// git's credential protocol as git-credential-kc reads it, in-process: `key=value`
/// lines, `url=` split as git 2.39's credential_from_url splits it, and the names the
/// credentials get in the keyring.
final class GitCredentialProtocolTests: XCTestCase {
    private typealias Helper = GitCredentialHelper

    private func parse(_ text: String) throws(GitCredentialHelper.Failure) -> GitCredentialHelper.Credential {
        try Helper.parse(Array(text.utf8))
    }

    private func failure(_ text: String) -> String? {
        failure(Array(text.utf8))
    }

    private func failure(_ bytes: [UInt8]) -> String? {
        do {
            _ = try Helper.parse(bytes)
            return nil
        } catch {
            return error.message
        }
    }

    private func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    private func service(_ text: String) throws -> String? {
        Helper.serviceName(for: try parse(text)).map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    // MARK: key=value lines

    func testKeyValueLinesAreReadAsGitSendsThem() throws {
        let credential = try parse("protocol=https\nhost=example.com:8443\npath=team/repo.git\nusername=alice\npassword=p=w=\noauth_refresh_token=r\npassword_expiry_utc=1700000000\n")
        XCTAssertEqual(text(credential.protocolName), "https")
        XCTAssertEqual(text(credential.host), "example.com:8443")
        XCTAssertEqual(text(credential.path), "team/repo.git")
        XCTAssertEqual(text(credential.username), "alice")
        XCTAssertEqual(text(credential.password), "p=w=", "the value is everything after the first '='")
        XCTAssertEqual(text(credential.refreshToken), "r")
        XCTAssertEqual(credential.passwordExpiry, 1_700_000_000)
    }

    func testACarriageReturnAtALineEndIsDroppedAsGitDropsIt() throws {
        let credential = try parse("protocol=https\r\nhost=example.com\r\nusername=alice\r\npassword=pw\r\n")
        XCTAssertEqual(text(credential.host), "example.com")
        XCTAssertEqual(text(credential.password), "pw")
        XCTAssertEqual(text(try parse("password=a\rb\n").password), "a\rb", "only a final one")
    }

    func testUnknownKeysAreIgnoredAsGitRequires() throws {
        let credential = try parse("capability[]=authtype\nprotocol=https\nwwwauth[]=Basic realm=x\nhost=h\nephemeral=1\n")
        XCTAssertEqual(text(credential.protocolName), "https")
        XCTAssertEqual(text(credential.host), "h")
        XCTAssertNil(credential.username)
    }

    func testTheLastValueOfAKeyWinsAndEmptyValuesAreKept() throws {
        let credential = try parse("username=alice\nusername=bob\npassword=\n")
        XCTAssertEqual(text(credential.username), "bob")
        XCTAssertEqual(credential.password, [])
        XCTAssertNil(try parse("").protocolName, "no input, no credential")
        XCTAssertEqual(text(try parse("host=h").host), "h", "a last line without a line feed")
    }

    func testPasswordExpiryMustBeSecondsSince1970() throws {
        XCTAssertEqual(try parse("password_expiry_utc=-5\n").passwordExpiry, -5)
        XCTAssertEqual(try parse("password_expiry_utc=9223372036854775807\n").passwordExpiry, Int64.max)
        for bad in ["soon", "", "1.5", " 1", "9223372036854775808", "0x10"] {
            XCTAssertEqual(failure("protocol=https\npassword_expiry_utc=\(bad)\n"),
                           "password_expiry_utc on line 2 is not a number of seconds since 1970", bad)
        }
        XCTAssertEqual(failure([UInt8]("password_expiry_utc=1".utf8) + [0xff]),
                       "password_expiry_utc on line 1 is not a number of seconds since 1970", "not UTF-8")
    }

    /// GitCredentialTests.testBadInputIsRefusedWithOneLineAndStoresNothing, in-process.
    func testMalformedLinesAreRefusedWithTheirLineNumber() {
        XCTAssertEqual(failure("protocol=https\nhost=h\nusername=alice\npassword=a\u{0}b\n"), "line 4 holds a NUL byte; git never sends one")
        XCTAssertEqual(failure("protocol=https\nhost=h\nusername alice\n"), "line 3 is not key=value")
        XCTAssertEqual(failure("\u{0}\n"), "line 1 holds a NUL byte; git never sends one", "NUL is checked before '='")
        XCTAssertEqual(failure("=value\n"), nil, "an empty key is an unknown key")
        XCTAssertEqual(failure("protocol=https\n\nnot a line\n"), "line 3 is not key=value",
                       "blank lines are skipped (the input already ended at the first one) and still counted")
    }

    // MARK: url=

    private func url(_ url: String) throws -> (protocol: String?, host: String?, path: String?, user: String?, password: String?) {
        let credential = try parse("url=\(url)\n")
        return (text(credential.protocolName), text(credential.host), text(credential.path),
                text(credential.username), text(credential.password))
    }

    func testAURLStandsForItsParts() throws {
        let parts = try url("https://bob:p%40ss@example.com:8443/team/repo.git")
        XCTAssertEqual(parts.protocol, "https")
        XCTAssertEqual(parts.host, "example.com:8443")
        XCTAssertEqual(parts.path, "team/repo.git")
        XCTAssertEqual(parts.user, "bob")
        XCTAssertEqual(parts.password, "p@ss", "user and password lose their %XX escapes")
        let bare = try url("https://example.com")
        XCTAssertEqual(bare.host, "example.com")
        XCTAssertNil(bare.path)
        XCTAssertNil(bare.user)
        XCTAssertNil(bare.password)
    }

    /// GitCredentialTests.testAURLIsSplitAsGitSplitsIt, in-process: the host ends at
    /// the first `/`, `?` or `#`, and the user information at the first `@` before it,
    /// so kc answers for the host git sends the answer to.
    func testAURLIsSplitWhereGitSplitsIt() throws {
        XCTAssertEqual(try url("https://evil.test?@victim.example").host, "evil.test")
        XCTAssertEqual(try url("https://evil.test?@victim.example").path, "?@victim.example", "the rest is the path, as in git")
        XCTAssertNil(try url("https://evil.test?@victim.example").user)
        XCTAssertEqual(try url("https://evil.test#@victim.example").host, "evil.test")
        let twoAts = try url("https://u@evil.test@victim.example")
        XCTAssertEqual(twoAts.user, "u")
        XCTAssertEqual(twoAts.host, "evil.test@victim.example")
        XCTAssertEqual(try url("https://host.example/?x").host, "host.example")
        XCTAssertEqual(try url("https://host.example/?x").path, "?x")
    }

    func testAURLPathLosesItsSlashesAndEscapes() throws {
        XCTAssertEqual(try url("https://h//team/repo.git//").path, "team/repo.git")
        XCTAssertNil(try url("https://h/").path)
        XCTAssertNil(try url("https://h///").path)
        XCTAssertEqual(try url("https://h/a%20b%2Fc").path, "a b/c")
        XCTAssertEqual(try url("https://h%2Fteam").host, "h/team", "a %2F in the host decodes to '/'")
        XCTAssertEqual(try url("https://h/100%").path, "100%", "a '%' without two hex digits stays")
        XCTAssertEqual(try url("https://h/%zz%4").path, "%zz%4")
        XCTAssertEqual(try url("https://h/%+f%-0%+0").path, "%+f%-0%+0", "a sign is not a hex digit: no NUL or 0x0F is made")
        XCTAssertEqual(try url("https://a:@h").password, "", "an empty password after ':'")
        XCTAssertEqual(try url("https://:pw@h").user, "")
    }

    func testAURLReplacesWhatCameBeforeIt() throws {
        let credential = try parse("protocol=http\nhost=old.example\nusername=old\npassword=old-pw\nurl=https://new.example\nusername=new\n")
        XCTAssertEqual(text(credential.protocolName), "https")
        XCTAssertEqual(text(credential.host), "new.example")
        XCTAssertEqual(text(credential.username), "new", "keys after url= still apply")
        XCTAssertNil(credential.password, "the password before url= is gone")
    }

    func testAURLWithoutAProtocolIsRefused() {
        for bad in ["example.com", "https:/example.com", ""] {
            XCTAssertEqual(failure("url=\(bad)\n"), "url= needs PROTOCOL://HOST, e.g. url=https://example.com", bad)
        }
    }

    // MARK: Names in the keyring

    func testEachRemoteIsAServiceNamedAfterProtocolHostAndPath() throws {
        XCTAssertEqual(try service("protocol=https\nhost=example.com\n"), "git:https:example.com")
        XCTAssertEqual(try service("url=https://example.com:8443/team/repo.git\n"), "git:https:example.com:8443%2Fteam%2Frepo.git")
        XCTAssertEqual(try service("protocol=https\nhost=h\npath=a%b\n"), "git:https:h%2Fa%25b")
        XCTAssertEqual(try service("protocol=git+ssh:x\nhost=h\n"), "git:git+ssh%3Ax:h", "':' in the protocol is escaped")
        XCTAssertEqual(try service("protocol=cert\npath=/home/alice/cert.p12\n"), "git:cert:%2F%2Fhome%2Falice%2Fcert.p12",
                       "a path without a host")
    }

    func testARemoteGitDidNotNameHasNoService() throws {
        XCTAssertNil(try service("host=example.com\n"), "no protocol")
        XCTAssertNil(try service("protocol=\nhost=example.com\n"), "an empty protocol")
        XCTAssertNil(try service("protocol=https\n"), "neither host nor path")
        XCTAssertNil(try service("protocol=https\nhost=\n"))
        XCTAssertNil(try service("protocol=https\nhost=" + String(repeating: "h", count: 246) + "\n"), "longer than 255 bytes")
        XCTAssertNotNil(try service("protocol=https\nhost=" + String(repeating: "h", count: 245) + "\n"))
    }

    /// GitCredentialTests.testAHostWithASlashDoesNotReadTheCredentialOfAHostWithAPath.
    func testAHostWithASlashIsNotTheHostWithAPath() throws {
        XCTAssertEqual(try service("protocol=https\nhost=h\npath=team\n"), "git:https:h%2Fteam")
        XCTAssertNil(try service("protocol=https\nhost=h/team\n"))
        XCTAssertNil(try service("url=https://h%2Fteam\n"))
    }

    func testEachUserIsAnItemAndItsRefreshTokenASibling() throws {
        let alice = try XCTUnwrap(Helper.itemNames(forUser: Array("alice".utf8)))
        XCTAssertEqual(alice.password, "alice")
        XCTAssertEqual(alice.refreshToken, "alice%oauth_refresh_token")
        let team = try XCTUnwrap(Helper.itemNames(forUser: Array("team/al%ice".utf8)))
        XCTAssertEqual(team.password, "team%2Fal%25ice", "GitCredentialTests.testAUserNameWithASlashIsStoredExactly")
        XCTAssertEqual(Helper.itemNames(forUser: Array("..".utf8))?.password, "%2E%2E")
        XCTAssertNil(Helper.itemNames(forUser: []))
        XCTAssertNotNil(Helper.itemNames(forUser: Array(repeating: UInt8(ascii: "u"), count: 235)))
        XCTAssertNil(Helper.itemNames(forUser: Array(repeating: UInt8(ascii: "u"), count: 236)),
                     "the refresh token's name must fit too")
    }

    // MARK: Where the input ends

    private func end(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        return Helper.blankLineEnd(in: bytes, 0..<bytes.count)
    }

    /// GitCredentialTests.testInputAfterTheBlankLineIsNotRead: the input ends at the
    /// first empty line.
    func testTheInputEndsAtTheFirstBlankLine() {
        XCTAssertEqual(end("host=h\n\nusername=mallory\n"), 7)
        XCTAssertEqual(end("host=h\r\n\r\nusername=mallory\n"), 8, "CR LF lines")
        XCTAssertEqual(end("\nhost=h\n"), 0, "an empty first line")
        XCTAssertEqual(end("\r\n"), 0)
        XCTAssertNil(end("host=h\nusername=u\n"))
        XCTAssertNil(end("host=h\r\n"))
        XCTAssertNil(end("a\rb\n"))
    }

    func testABlankLineSplitAcrossTwoReadsIsFound() {
        let bytes = Array("host=h\n\nafter".utf8)
        XCTAssertNil(Helper.blankLineEnd(in: bytes, 0..<7), "the first read ends after the first line feed")
        XCTAssertEqual(Helper.blankLineEnd(in: bytes, 6..<8), 7, "the next read is scanned from the byte before it")
    }
}
