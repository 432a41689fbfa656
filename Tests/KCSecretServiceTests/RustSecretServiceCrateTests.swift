import Foundation
import KCTestSupport
import XCTest

/// The Rust `secret-service` crate as Debian 12 packages it (librust-secret-service-dev
/// 2.0.1, on zbus 1), built offline with Debian's cargo from /usr/share/cargo/registry
/// into a small client: it stores, searches, reads and deletes through kc-secretd in both
/// transports (`EncryptionType::Plain`, `EncryptionType::Dh`), and opens many sessions.
/// `Tools/test.sh --long` only (the first build takes minutes; later ones reuse it).
final class RustSecretServiceCrateTests: KeyringTestCase {
    static let crate = "/usr/share/cargo/registry/secret-service-2.0.1"
    static let project = builtFolder + "/upstream-clients/rust-secret-service"
    static var client: String { project + "/target/release/kc-secret-service-client" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try LongRun.require()
        try LongRun.requireProgram("/usr/bin/cargo", package: "cargo")
        try LongRun.requireProgram("/usr/bin/rustc", package: "rustc")
        guard FileManager.default.fileExists(atPath: Self.crate) else {
            throw XCTSkip("no \(Self.crate) (Debian's librust-secret-service-dev; Tools/test.sh --long installs it)")
        }
        try Self.build()
    }

    /// Writes the project (only what changed, so cargo keeps what it built) and builds it
    /// with Debian's cargo and rustc, offline, against Debian's registry alone.
    static func build() throws {
        let files = ["Cargo.toml": manifest, "cargo-home/config.toml": registry, "src/main.rs": program]
        for (name, text) in files {
            let path = project + "/" + name
            if (try? String(contentsOfFile: path, encoding: .utf8)) == text { continue }
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let built = try runCommand("/usr/bin/timeout", ["1800", "/usr/bin/cargo", "build", "--release", "--offline", "--quiet",
                                                        "--manifest-path", project + "/Cargo.toml"],
                                   environment: ["PATH": "/usr/bin:/bin", "HOME": project, "CARGO_HOME": project + "/cargo-home",
                                                 "RUSTC": "/usr/bin/rustc"])
        guard built.status == 0 else {
            throw XCTSkip("the secret-service crate did not build offline from Debian's registry: \(built.standardError.suffix(2000))")
        }
    }

    private func rust(_ bus: SessionBus, _ arguments: String..., input: [UInt8] = []) throws -> CommandResult {
        try bus.client(Self.client, arguments, input: input, timeLimit: 120)
    }

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// Values of every length around the AES block, with bytes that are not UTF-8 and a
    /// NUL: stored with one transport, the same bytes in kc and read back with the other.
    func testValuesAreStoredSearchedReadAndDeletedThroughBothTransports() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let values: [[UInt8]] = [[], [0x41], Array("rust-s3cret".utf8), [0x72, 0xff, 0x00, 0x74]]
            + [15, 16, 17, 31, 32, 33].map { length in (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 200) } }
        for (store, read) in [("plain", "dh"), ("dh", "plain")] {
            for value in values {
                let user = "\(store)-\(value.count)"
                let stored = try rust(bus, "store", store, service, user, input: value)
                XCTAssertEqual(stored.status, 0, "\(stored)")
                XCTAssertTrue(stored.output.hasPrefix("stored /org/freedesktop/secrets/collection/login/"), "\(stored)")
                XCTAssertEqual(try bus.kc("get", service, user).standardOutput, value, "kc holds the bytes stored over \(store)")

                let found = try rust(bus, "read", read, service, user)
                XCTAssertEqual(found.status, 0, "\(found)")
                XCTAssertEqual(found.output, "found 1\nsecret \(Self.hex(value)) application/octet-stream rust secret-service item\n",
                               "stored over \(store), read over \(read)")
            }
        }
        for value in values {
            let user = "dh-\(value.count)"
            let deleted = try rust(bus, "delete", "dh", service, user)
            XCTAssertEqual(deleted.output, "deleted 1 left 0\n", "\(deleted)")
            XCTAssertEqual(try bus.kc("get", service, user).status, 1, "the kc item went with it")
        }
        XCTAssertEqual(try rust(bus, "read", "plain", service, "plain-16").output.prefix(8), "found 1\n", "the other items stay")
    }

    /// 200 connections, each with its own DH session (its own keys), read an item `kc
    /// set` stored: every one decrypts the same bytes.
    func testManyDHSessionsAllReadTheSameBytes() throws {
        let bus = try startSecretServiceBus()
        let service = uniqueService()
        let value: [UInt8] = Array("from kc set \u{e9}".utf8) + [0xff, 0x01]
        XCTAssertEqual(try bus.kc("set", "--access", "after-first-unlock", service, "alice", input: value).status, 0)

        let read = try rust(bus, "sessions", "dh", service, "alice", "200")

        XCTAssertEqual(read.status, 0, "\(read)")
        XCTAssertEqual(read.output, "read \(Self.hex(value)) 200\n")
    }

    static let manifest = """
        [package]
        name = "kc-secret-service-client"
        version = "0.1.0"
        edition = "2018"

        [dependencies]
        secret-service = "=2.0.1"

        """

    /// Debian's registry as the only source of crates, offline.
    static let registry = """
        [source.crates-io]
        replace-with = "debian"

        [source.debian]
        directory = "/usr/share/cargo/registry"

        [net]
        offline = true

        """

    /// The client: `store|read|delete|sessions plain|dh SERVICE USER [COUNT]`.
    static let program = #"""
        // A client of the Secret Service built on Debian's `secret-service` crate (2.0.1, on
        // zbus 1), for kc's tests: each command does one thing and prints what it saw.
        use secret_service::{EncryptionType, SecretService};
        use std::collections::HashMap;
        use std::io::Read;
        use std::process::exit;

        fn hex(bytes: &[u8]) -> String {
            bytes.iter().map(|byte| format!("{:02x}", byte)).collect()
        }

        fn fail(what: &str, error: impl std::fmt::Display) -> ! {
            eprintln!("{}: {}", what, error);
            exit(1)
        }

        fn main() {
            let arguments: Vec<String> = std::env::args().collect();
            if arguments.len() < 5 {
                fail("usage", "store|read|delete|sessions plain|dh SERVICE USER [COUNT]");
            }
            let encryption = match arguments[2].as_str() {
                "plain" => EncryptionType::Plain,
                "dh" => EncryptionType::Dh,
                other => fail("encryption", other),
            };
            let (service, user) = (arguments[3].as_str(), arguments[4].as_str());
            let attributes = vec![("service", service), ("username", user)];
            let secret_service = SecretService::new(encryption).unwrap_or_else(|error| fail("open session", error));
            match arguments[1].as_str() {
                "store" => {
                    let mut secret = Vec::new();
                    std::io::stdin().read_to_end(&mut secret).unwrap_or_else(|error| fail("stdin", error));
                    let collection = secret_service.get_default_collection().unwrap_or_else(|error| fail("default collection", error));
                    let properties: HashMap<&str, &str> = attributes.iter().cloned().collect();
                    let item = collection
                        .create_item("rust secret-service item", properties, &secret, true, "application/octet-stream")
                        .unwrap_or_else(|error| fail("create item", error));
                    println!("stored {}", item.item_path.as_str());
                }
                "read" => {
                    let items = secret_service.search_items(attributes).unwrap_or_else(|error| fail("search", error));
                    println!("found {}", items.len());
                    for item in items {
                        let secret = item.get_secret().unwrap_or_else(|error| fail("get secret", error));
                        let content_type = item.get_secret_content_type().unwrap_or_else(|error| fail("content type", error));
                        let label = item.get_label().unwrap_or_else(|error| fail("label", error));
                        println!("secret {} {} {}", hex(&secret), content_type, label);
                    }
                }
                "delete" => {
                    let items = secret_service.search_items(attributes.clone()).unwrap_or_else(|error| fail("search", error));
                    for item in &items {
                        item.delete().unwrap_or_else(|error| fail("delete", error));
                    }
                    let left = secret_service.search_items(attributes).unwrap_or_else(|error| fail("search", error));
                    println!("deleted {} left {}", items.len(), left.len());
                }
                "sessions" => {
                    // Each round its own connection and session: a DH agreement wrong for some
                    // keys fails only in some rounds.
                    let count: usize = arguments.get(5).and_then(|text| text.parse().ok()).unwrap_or(100);
                    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
                    for _ in 0..count {
                        let round = SecretService::new(if arguments[2] == "dh" { EncryptionType::Dh } else { EncryptionType::Plain })
                            .unwrap_or_else(|error| fail("open session", error));
                        let items = round.search_items(attributes.clone()).unwrap_or_else(|error| fail("search", error));
                        let item = items.first().unwrap_or_else(|| fail("search", "no item"));
                        let secret = item.get_secret().unwrap_or_else(|error| fail("get secret", error));
                        *seen.entry(secret).or_insert(0) += 1;
                    }
                    for (secret, times) in seen {
                        println!("read {} {}", hex(&secret), times);
                    }
                }
                other => fail("command", other),
            }
        }
        """#
}
