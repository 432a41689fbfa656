// swift-tools-version:6.0
// libFuzzer harnesses for kc's parsers (Tools/fuzz/run.sh builds them with
// -sanitize=fuzzer,address). One program; KC_FUZZ_TARGET picks the harness.
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name, which depends on where kc was cloned.
let kcRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
let kcIdentity = kcRoot.lastPathComponent.lowercased()

let package = Package(
    name: "kc-fuzz",
    dependencies: [.package(path: kcRoot.path)],
    targets: [
        .executableTarget(
            name: "kc-fuzz",
            dependencies: [
                .product(name: "KernelKeychain", package: kcIdentity),
                .product(name: "Keyrings", package: kcIdentity),
                .product(name: "KeychainFS", package: kcIdentity),
            ],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
    ]
)
