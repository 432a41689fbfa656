@testable import KCSecretService
import XCTest

/// The server's half of `dh-ietf1024-sha256-aes128-cbc-pkcs7` against the client a
/// Python program uses (secretstorage's `Session` and its AES-CBC through
/// `cryptography`): both sides derive the same key, and each opens what the other seals.
final class DHKeyPairTests: XCTestCase {
    /// Python's client side. Each input line is "mode server-public-key"; each output
    /// line "client-public-key aes-key iv ciphertext secret", in hex ("-" for an empty
    /// secret). Modes: `any`, a session as secretstorage opens it; `zero-top-byte-secret`
    /// and `short-client-key`, a session searched for until the shared secret (or the
    /// client's public key) is below 2^1016, so starts with a zero byte. The search uses
    /// 256-bit client exponents to be quick; the key derivation is still secretstorage's.
    static let clientScript = """
        import os, secrets, sys
        from secretstorage.dhcrypto import DH_PRIME_1024, Session, int_to_bytes
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        for line in sys.stdin:
            mode, server_hex = line.split()
            server = int(server_hex, 16)
            session = Session()
            while mode != 'any':
                session.my_private_key = secrets.randbits(256)
                session.my_public_key = pow(2, session.my_private_key, DH_PRIME_1024)
                if mode == 'short-client-key' and session.my_public_key < 1 << 1016:
                    break
                if mode == 'zero-top-byte-secret' and pow(server, session.my_private_key, DH_PRIME_1024) < 1 << 1016:
                    break
            session.set_server_public_key(server)
            secret = os.urandom(secrets.randbelow(100))
            # As secretstorage's util.format_secret seals a secret.
            padding = 16 - len(secret) % 16
            iv = os.urandom(16)
            encryptor = Cipher(algorithms.AES(session.aes_key), modes.CBC(iv)).encryptor()
            value = encryptor.update(secret + bytes((padding,) * padding)) + encryptor.finalize()
            print(int_to_bytes(session.my_public_key).hex(), session.aes_key.hex(), iv.hex(), value.hex(), secret.hex() or '-')
        """

    /// Opens "aes-key iv ciphertext" lines with `cryptography`, checking the PKCS#7
    /// padding strictly, and prints each secret in hex ("-" when empty).
    static let openScript = """
        import sys
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        for line in sys.stdin:
            key, iv, value = (bytes.fromhex(field) for field in line.split())
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            padded = decryptor.update(value) + decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            secret = unpadder.update(padded) + unpadder.finalize()
            print(secret.hex() or '-')
        """

    static let pythonModules = ["secretstorage.dhcrypto", "cryptography.hazmat.primitives.ciphers"]

    func testSecretStorageClientAndServerAgreeOnKeysAndSecrets() throws {
        let modes = [String](repeating: "any", count: 50)
            + [String](repeating: "zero-top-byte-secret", count: 4)
            + [String](repeating: "short-client-key", count: 4)
        let servers = try modes.map { _ in try DHKeyPair.generate() }
        XCTAssertEqual(Set(servers.map(\.publicKey)).count, servers.count, "every session has its own key")
        let clients = try PythonReference.run(
            Self.clientScript, lines: zip(modes, servers).map { "\($0) \($1.publicKey.hex)" },
            requiring: Self.pythonModules)
        XCTAssertEqual(clients.count, servers.count)

        var openRequests: [String] = []
        var sealedSecrets: [[UInt8]] = []
        for (index, (server, line)) in zip(servers, clients).enumerated() {
            let fields = line.split(separator: " ").map { $0 == "-" ? [] : [UInt8](hex: $0) }
            guard fields.count == 5, let clientKey = fields[0], let pythonKey = fields[1], let iv = fields[2],
                  let value = fields[3], let secret = fields[4] else {
                XCTFail("session \(index): unreadable client line \(line)")
                continue
            }
            let context = "session \(index) (\(modes[index]))"
            if modes[index] == "short-client-key" { XCTAssertLessThan(clientKey.count, 128, context) }
            let key = try server.sharedAESKey(clientPublicKey: clientKey)
            XCTAssertEqual(key, pythonKey, context)
            XCTAssertEqual(try SecretCipher.decrypt(value, parameters: iv, key: key), secret, context)

            let ours = (0..<(index % 40)).map { _ in UInt8.random(in: 0...255) }
            let sealed = try SecretCipher.encrypt(ours, key: key)
            openRequests.append("\(pythonKey.hex) \(sealed.parameters.hex) \(sealed.value.hex)")
            sealedSecrets.append(ours)
        }
        let opened = try PythonReference.run(Self.openScript, lines: openRequests, requiring: Self.pythonModules)
        XCTAssertEqual(opened, sealedSecrets.map { $0.isEmpty ? "-" : $0.hex })
    }

    func testTwoKeyPairsDeriveTheSameKey() throws {
        for _ in 0..<20 {
            let server = try DHKeyPair.generate(), client = try DHKeyPair.generate()
            let key = try server.sharedAESKey(clientPublicKey: client.publicKey)
            XCTAssertEqual(key.count, 16)
            XCTAssertEqual(key, try client.sharedAESKey(clientPublicKey: server.publicKey))
        }
    }

    func testPublicKeysAre128BytesAndInTheGroup() throws {
        for _ in 0..<50 {
            let publicKey = try DHKeyPair.generate().publicKey
            XCTAssertEqual(publicKey.count, 128)
            XCTAssertNoThrow(try OakleyGroup2.publicValue(bigEndian: publicKey))
        }
    }

    func testRefusesClientKeysOutsideTwoToPMinusTwo() throws {
        let server = try DHKeyPair.generate()
        let p = OakleyGroup2.prime
        let refused: [(String, [UInt8])] = [
            ("empty", []),
            ("0", [0]),
            ("128 zero bytes", [UInt8](repeating: 0, count: 128)),
            ("1", [1]),
            ("1, left-padded", [UInt8](repeating: 0, count: 127) + [1]),
            ("p - 1", p.adding(-1)),
            ("p", p),
            ("p + 1", p.adding(1)),
            ("2^1024 - 1", [UInt8](repeating: 0xFF, count: 128)),
            ("2^1024", [1] + [UInt8](repeating: 0, count: 128)),
            ("129 nonzero bytes", [UInt8](repeating: 0x5A, count: 129)),
        ]
        for (name, key) in refused {
            XCTAssertThrowsError(try server.sharedAESKey(clientPublicKey: key), name) { error in
                XCTAssertEqual(error as? SecretCryptoError, .invalidPublicKey, name)
            }
        }
        let accepted: [(String, [UInt8])] = [
            ("2", [2]),
            ("p - 2", p.adding(-2)),
            ("a key with extra leading zeros", [0, 0] + (try DHKeyPair.generate().publicKey)),
        ]
        for (name, key) in accepted {
            XCTAssertEqual(try server.sharedAESKey(clientPublicKey: key).count, 16, name)
        }
    }

    /// Prints what a session's key agreement costs; this is a debug build, so the
    /// numbers are only a rough guide (the release figures are in the commit message).
    func testKeyAgreementCostIsPrinted() throws {
        let count = 20
        let clock = ContinuousClock()
        var pairs: [DHKeyPair] = []
        let generating = try clock.measure {
            for _ in 0..<count { pairs.append(try DHKeyPair.generate()) }
        }
        var keys: [[UInt8]] = []
        let agreeing = try clock.measure {
            for index in 0..<count {
                keys.append(try pairs[index].sharedAESKey(clientPublicKey: pairs[(index + 1) % count].publicKey))
            }
        }
        XCTAssertEqual(keys.count, count)
        print("DHKeyPair.generate(): \(generating / count) each; sharedAESKey(clientPublicKey:): \(agreeing / count) each")
    }
}

extension Array where Element == UInt8 {
    /// The big-endian number plus `delta` (−2 … 2), same length; no carry past the top.
    func adding(_ delta: Int) -> [UInt8] {
        var bytes = self
        var carry = delta
        for index in bytes.indices.reversed() where carry != 0 {
            let sum = Int(bytes[index]) + carry
            bytes[index] = UInt8(truncatingIfNeeded: sum)
            carry = sum >> 8
        }
        return bytes
    }
}
