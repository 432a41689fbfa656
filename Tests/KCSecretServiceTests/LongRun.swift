import Foundation
import XCTest

/// The heavy clients (a browser, a Rust build, a desktop application under Xvfb) run in
/// `Tools/test.sh --long` only, which sets `KC_LONG=1` and installs them: CI, which runs
/// without it, stays within its time.
enum LongRun {
    static var enabled: Bool { ProcessInfo.processInfo.environment["KC_LONG"] == "1" }

    static func require() throws {
        guard enabled else { throw XCTSkip("heavy client; runs in Tools/test.sh --long") }
    }

    /// Skips unless `path` is an executable, naming the Debian package that brings it.
    static func requireProgram(_ path: String, package: String) throws {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw XCTSkip("no \(path) (Debian's \(package); Tools/test.sh --long installs it)")
        }
    }
}
