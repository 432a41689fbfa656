import Foundation
import KCTestSupport
import XCTest

/// python3, the independent implementation the crypto tests compare with: its
/// built-in `pow` for the arithmetic, and the `secretstorage` client (dhcrypto's
/// `Session`, the `cryptography` package's AES-CBC) for whole sessions.
///
/// A test that needs what is missing skips with the reason rather than fails.
enum PythonReference {
    static let interpreter = "/usr/bin/python3"

    /// The prime of RFC 2409 §6.2 as the RFC prints it, typed in here rather than taken
    /// from the code under test.
    static let primeHex = """
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74\
        020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437\
        4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF
        """

    /// Runs `script` with `arguments`, one line of standard input per element of
    /// `lines`, and returns its standard output's lines. Skips the test when python3
    /// or one of `modules` is not installed.
    static func run(_ script: String, arguments: [String] = [], lines: [String],
                    requiring modules: [String] = []) throws -> [String] {
        guard FileManager.default.isExecutableFile(atPath: interpreter) else {
            throw XCTSkip("\(interpreter) is not installed: nothing independent to compare with")
        }
        if !modules.isEmpty {
            let probe = try runCommand(interpreter, ["-c", "import " + modules.joined(separator: ", ")])
            guard probe.status == 0 else {
                throw XCTSkip("python3 lacks \(modules.joined(separator: ", ")) (Debian: python3-secretstorage, python3-cryptography)")
            }
        }
        let input = Array(lines.map { $0 + "\n" }.joined().utf8)
        let result = try runCommand(interpreter, ["-c", script] + arguments, input: input)
        guard result.status == 0 else {
            XCTFail("python3 failed: \(result.standardError)")
            return []
        }
        return result.output.split(separator: "\n").map(String.init)
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex, two digits a byte.
    var hex: String {
        map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }

    /// The bytes of an even-length hex string, or nil.
    init?(hex: some StringProtocol) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let byte = UInt8(String(decoding: digits[index..<(index + 2)], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
            index += 2
        }
        self = bytes
    }
}
