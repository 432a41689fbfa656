import Crypto
import Foundation
import XCTest
@testable import Age

/// The C2SP/CCTV age test vectors (see Vectors/README.md): every vendored vector is
/// decrypted and must give the outcome its `expect:` line names.
final class AgeTestVectorTests: XCTestCase {
    /// One vector file: its textual header and the age file after the blank line.
    struct Vector {
        var name: String
        var expect = ""
        var payloadSHA256: String?
        var identities: [String] = []
        var passphrases: [String] = []
        var armored = false
        var compressed = false
        var unknownKeys: [String] = []
        var file: [UInt8] = []

        init(name: String, contents: [UInt8]) throws {
            self.name = name
            var index = contents.startIndex
            while true {
                guard let lineFeed = contents[index...].firstIndex(of: UInt8(ascii: "\n")) else {
                    throw AgeError.malformedHeader("vector \(name) has no blank line")
                }
                let line = String(decoding: contents[index..<lineFeed], as: UTF8.self)
                index = lineFeed + 1
                if line.isEmpty { break }
                guard let separator = line.range(of: ": ") else {
                    unknownKeys.append(line)
                    continue
                }
                let key = String(line[..<separator.lowerBound])
                let value = String(line[separator.upperBound...])
                switch key {
                case "expect": expect = value
                case "payload": payloadSHA256 = value
                case "identity": identities.append(value)
                case "passphrase": passphrases.append(value)
                case "armored": armored = value == "yes"
                case "compressed": compressed = value == "zlib"
                case "file key", "comment": break
                default: unknownKeys.append(key)
                }
            }
            file = Array(contents[index...])
        }
    }

    /// What decrypting gave, in the vectors' words.
    enum Outcome: Equatable, CustomStringConvertible {
        case success(sha256: String)
        case failure(AgeError)

        var description: String {
            switch self {
            case .success(let sha256): "success (\(sha256.prefix(12))…)"
            case .failure(let error): "\(error)"
            }
        }
    }

    func testEveryVendoredVectorGivesItsExpectedOutcome() throws {
        guard let folder = Bundle.module.url(forResource: "Vectors", withExtension: nil) else {
            return XCTFail("the Vectors resource folder is missing")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { !$0.hasSuffix(".md") && !$0.hasPrefix(".") }
            .sorted()
        XCTAssertGreaterThanOrEqual(names.count, 90, "vectors missing from the resource folder")
        let python = executable("/usr/bin/python3", "/usr/local/bin/python3")
        var passed: [String: Int] = [:]
        var skipped: [String: [String]] = [:]
        var workFactorRefusals = 0
        var inflated = 0

        for name in names {
            var vector = try Vector(name: name, contents: [UInt8](Data(contentsOf: folder.appendingPathComponent(name))))
            if vector.armored { skipped["armored", default: []].append(name); continue }
            if !vector.unknownKeys.isEmpty { skipped["unknown header keys", default: []].append(name); continue }
            if vector.compressed {
                guard let python else { skipped["zlib-compressed, no python3 to inflate", default: []].append(name); continue }
                vector.file = try Self.inflate(vector.file, python: python)
                inflated += 1
            }
            let outcomes = try Self.decrypt(vector)
            if ProcessInfo.processInfo.environment["AGE_VECTORS_VERBOSE"] != nil { print("\(name): \(outcomes)") }
            for outcome in outcomes {
                let matches: Bool
                switch (vector.expect, outcome) {
                case ("success", .success(let sha256)):
                    matches = sha256 == vector.payloadSHA256
                case ("no match", .failure(.noMatchingIdentity)),
                     ("HMAC failure", .failure(.headerMACMismatch)),
                     ("header failure", .failure(.malformedHeader)),
                     ("payload failure", .failure(.malformedPayload)):
                    matches = true
                case ("header failure", .failure(.workFactorTooHigh)):
                    // age reports a work factor above its limit as a header failure.
                    matches = true
                    workFactorRefusals += 1
                default:
                    matches = false
                }
                XCTAssertTrue(matches, "\(name): expected \(vector.expect), got \(outcome)")
            }
            passed[vector.expect, default: 0] += 1
        }

        let total = passed.values.reduce(0, +)
        print("CCTV age vectors: \(total) run (\(inflated) of them zlib-inflated with python3), by expected outcome:")
        for (expect, count) in passed.sorted(by: { $0.key < $1.key }) { print("  \(expect): \(count)") }
        print("  (header failures reported as workFactorTooHigh: \(workFactorRefusals))")
        for (reason, skippedNames) in skipped.sorted(by: { $0.key < $1.key }) {
            print("  skipped, \(reason): \(skippedNames.count) (\(skippedNames.joined(separator: ", ")))")
        }
    }

    /// Decrypts with the vector's identities, and separately with each passphrase
    /// (kc's API takes one passphrase; the first that is not "no match" counts).
    static func decrypt(_ vector: Vector) throws -> [Outcome] {
        var outcomes: [Outcome] = []
        // A vector without keys (an empty file) must fail before any key is needed.
        if !vector.identities.isEmpty || vector.passphrases.isEmpty {
            let identities = try vector.identities.map { try AgeX25519Identity(parsing: $0) }
            outcomes.append(outcome { () throws(AgeError) in try Age.decrypt(vector.file, identities: identities) })
        }
        if !vector.passphrases.isEmpty {
            var passphraseOutcome = Outcome.failure(.noMatchingIdentity)
            for passphrase in vector.passphrases {
                passphraseOutcome = outcome { () throws(AgeError) in try Age.decrypt(vector.file, passphrase: Array(passphrase.utf8)) }
                if passphraseOutcome != .failure(.noMatchingIdentity) { break }
            }
            outcomes.append(passphraseOutcome)
        }
        return outcomes
    }

    static func outcome(_ decrypt: () throws(AgeError) -> [UInt8]) -> Outcome {
        do {
            let plaintext = try decrypt()
            return .success(sha256: SHA256.hash(data: plaintext).map { String(format: "%02x", $0) }.joined())
        } catch {
            return .failure(error)
        }
    }

    /// zlib-decompresses with python3 (the vectors compress their large files).
    static func inflate(_ compressed: [UInt8], python: String) throws -> [UInt8] {
        let result = try runProgram(python, ["-c", "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))"], input: compressed)
        guard result.status == 0 else {
            throw AgeError.malformedPayload("python3 could not inflate a vector: \(result.standardError)")
        }
        return result.standardOutput
    }
}
