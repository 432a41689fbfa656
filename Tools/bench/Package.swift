// swift-tools-version:6.0
// The in-process side of Tools/bench/run.sh: Keychain reads through KernelKeychain,
// timed the same way as raw_read.c times the raw libkeyutils calls.
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name, which depends on where kc was cloned.
let kcRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
let kcIdentity = kcRoot.lastPathComponent.lowercased()

let package = Package(
    name: "kc-bench",
    dependencies: [.package(path: kcRoot.path)],
    targets: [
        .executableTarget(
            name: "keychain-bench",
            dependencies: [.product(name: "KernelKeychain", package: kcIdentity)]
        ),
    ]
)
