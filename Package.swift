// swift-tools-version:6.2
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

// `kc get` is a whole process that should cost about what C's `keyctl pipe` costs.
// A dynamically linked Swift program pays for loading and relocating the Swift
// runtime; a fully static executable does not (see docs/BENCHMARKS.md). So the
// release build of the CLI is a static executable; debug builds (and `swift test`)
// stay dynamic.
// FoundationEssentials (used by swift-argument-parser and our JSON) needs its two
// helper archives named explicitly when linked statically.
let staticRelease: [LinkerSetting] = [
    // Stripped, too: the symbol and debug sections nearly double the file, and a
    // stripped `kc get` measured 20% faster (docs/BENCHMARKS.md).
    .unsafeFlags(["-static-executable", "-Xlinker", "--strip-all"], .when(platforms: [.linux], configuration: .release)),
    .linkedLibrary("_FoundationCollections", .when(platforms: [.linux], configuration: .release)),
    .linkedLibrary("_FoundationCShims", .when(platforms: [.linux], configuration: .release)),
]

// A daemon that must link a shared library (libsystemd) cannot be a static executable;
// its Swift runtime and Foundation can still be linked in. Linked by lld with no dynamic
// symbol table beyond what the shared libraries need and, where the C library's loader
// reads them (glibc 2.36: Debian 12, Ubuntu 24.04; not Ubuntu 22.04's 2.35, which would
// refuse to start the daemon), packed relative relocations (DT_RELR: a 9 KB table where
// there were 1.1 MB of RELA entries, all written by the loader at start): 1.6 MB less of
// the daemon's own file stays resident (docs/BENCHMARKS.md, issue 37). The manifest runs
// on the machine that builds, which is the one that runs the daemon (Tools/setup.sh).
let packedRelocations: [String] = glibcReadsPackedRelocations ? ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"] : []
let staticStdlibRelease: [LinkerSetting] = [
    .unsafeFlags(["-static-stdlib", "-use-ld=lld"] + packedRelocations
                 + ["-Xlinker", "--no-export-dynamic", "-Xlinker", "--strip-all"],
                 .when(platforms: [.linux], configuration: .release)),
    .linkedLibrary("_FoundationCollections", .when(platforms: [.linux], configuration: .release)),
    .linkedLibrary("_FoundationCShims", .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "kc",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "KernelKeychain", targets: ["KernelKeychain"]),
        .library(name: "Keyrings", targets: ["Keyrings"]),
        .library(name: "KeyringCore", targets: ["KeyringCore"]),
        .library(name: "KeychainFS", targets: ["KeychainFS"]),
        .library(name: "KCIntegrations", targets: ["KCIntegrations"]),
        .executable(name: "kc", targets: ["kc"]),
        .executable(name: "kc-mountd", targets: ["kc-mountd"]),
        .executable(name: "kc-secretd", targets: ["kc-secretd"]),
        .executable(name: "kc-agent", targets: ["kc-agent"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        .systemLibrary(name: "CKeyutils", pkgConfig: "libkeyutils",
                       providers: [.apt(["libkeyutils-dev"])]),
        // The keyring core (docs/DESIGN-NOTES.md, "One core for both programs"): the rules
        // and kernel calls the full kc and the front share. Tools/build-front.sh compiles
        // these same files into the front with Embedded Swift; here they are an ordinary
        // module, held to what Embedded Swift accepts so that a normal build keeps them
        // fit for the front.
        .target(
            name: "KeyringCore",
            dependencies: ["CKeyutils"],
            swiftSettings: [.treatWarning("EmbeddedRestrictions", as: .error)]
        ),
        .target(
            name: "Keyrings",
            dependencies: [
                "CKeyutils",
                "KeyringCore",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The age v1 file format (age-encryption.org/v1) on swift-crypto: the vault's
        // files are age files that Debian's `age` reads and writes.
        .target(
            name: "Age",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Linux calls glibc does not wrap (openat2, for the vault's reads that must not
        // cross into a mount): a module map and one header, no library.
        .systemLibrary(name: "CLinux"),
        .target(name: "KernelKeychain", dependencies: ["Keyrings", "KeyringCore", "Age", "CLinux", .product(name: "Crypto", package: "swift-crypto")]),
        .systemLibrary(name: "CFuse3", pkgConfig: "fuse3",
                       providers: [.apt(["libfuse3-dev"])]),
        .target(
            name: "KeychainFS",
            dependencies: [
                "KernelKeychain",
                "Keyrings",
                "CFuse3",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The integrations' protocols (git and docker credential helpers, the systemd
        // credential server, podman's secret driver, kc exec's environment): a library,
        // so their parsers and codecs are tested in-process. No Foundation, no
        // ArgumentParser: `git-credential-kc get` starts as fast as `kc get`.
        .target(name: "KCIntegrations", dependencies: ["KernelKeychain", "Keyrings", "KeyringCore"]),
        .executableTarget(
            name: "kc",
            dependencies: [
                "KCIntegrations",
                "KeyringCore",
                "KernelKeychain",
                "Keyrings",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: staticRelease
        ),
        // The FUSE daemon that `kc mount` starts. A separate program so that `kc get`
        // does not load libfuse and the filesystem: that alone measured ~40 µs a call.
        .executableTarget(
            name: "kc-mountd",
            dependencies: [
                "KernelKeychain",
                "Keyrings",
                "KeychainFS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: staticRelease
        ),
        // The Secret Service (org.freedesktop.secrets) over sd-bus. Debian ships no static
        // libsystemd, so kc-secretd links it dynamically; the Swift runtime is linked in
        // statically so that the installed daemon needs no toolchain beside it.
        .systemLibrary(name: "CSDBus", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),
        // libgcrypt's modular power for the Secret Service's Diffie-Hellman transport, as
        // gnome-keyring uses it (libsystemd already links libgcrypt on Debian).
        .systemLibrary(name: "CGcrypt", providers: [.apt(["libgcrypt20-dev"])]),
        .target(
            name: "KCSecretService",
            dependencies: [
                "Age",
                "KernelKeychain",
                "Keyrings",
                "CSDBus",
                "CGcrypt",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "kc-secretd",
            dependencies: ["KCSecretService", "KernelKeychain"],
            linkerSettings: staticStdlibRelease
        ),
        // kc as OpenBao's agent (issue 38): libcurl for HTTPS with a CA file and a client
        // certificate (Debian's libcurl4-openssl-dev), kept out of kc itself so that `kc get`
        // loads no TLS library.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(name: "KCAgent", dependencies: ["KernelKeychain", "Keyrings", "KeyringCore", "CCurl"]),
        .executableTarget(
            name: "kc-agent",
            dependencies: ["KCAgent", "KernelKeychain", "Keyrings"],
            linkerSettings: staticStdlibRelease
        ),
        // Shared by the test targets: a fresh session keyring per test process, unique
        // service names, the built `kc`, and the unprivileged test user.
        .target(name: "KCTestSupport", dependencies: ["KernelKeychain", "Keyrings"], path: "Tests/KCTestSupport"),
        .testTarget(name: "AgeTests", dependencies: ["Age", .product(name: "Crypto", package: "swift-crypto")], resources: [.copy("Vectors")]),
        .testTarget(name: "KeyringsTests", dependencies: ["Keyrings", "KCTestSupport"]),
        .testTarget(name: "KeyringCoreTests", dependencies: ["KeyringCore", "Keyrings", "KCTestSupport"]),
        .testTarget(name: "KernelKeychainTests", dependencies: ["KernelKeychain", "Keyrings", "KCTestSupport"]),
        .testTarget(name: "KCIntegrationsTests", dependencies: ["KCIntegrations", "KernelKeychain", "Keyrings", "KCTestSupport"]),
        .testTarget(name: "KeychainFSTests", dependencies: ["KeychainFS", "KernelKeychain", "Keyrings", "KCTestSupport"]),
        // The library as another user: the sharing tests run it under runuser.
        .executableTarget(name: "kc-keychain-probe", dependencies: ["KernelKeychain", "Keyrings"], path: "Tests/KeychainProbe"),
        // Attacks by other local users (issue 13): real users, real sessions.
        .testTarget(name: "SecurityTests", dependencies: ["KernelKeychain", "Keyrings", "KCTestSupport"]),
        .testTarget(name: "KCSecretServiceTests", dependencies: ["KCSecretService", "KernelKeychain", "Keyrings", "KCTestSupport", .product(name: "Crypto", package: "swift-crypto")]),
        // Code written the way KeychainAccess's, FXKeychain's and Lockbox's READMEs use
        // their APIs, ported to kc: it imports KernelKeychain alone.
        .testTarget(name: "PortedAPITests", dependencies: ["KernelKeychain", "KCTestSupport"],
                    swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]),
        .testTarget(name: "KCAgentTests", dependencies: ["KCAgent", "KernelKeychain"]),
        .testTarget(name: "kcTests", dependencies: ["kc", "kc-agent", "kc-keychain-probe", "KernelKeychain", "Keyrings", "KCTestSupport"]),
    ]
)

/// Whether this machine's glibc loader applies DT_RELR (2.36 and later).
var glibcReadsPackedRelocations: Bool {
    #if canImport(Glibc)
    // confstr(_CS_GNU_LIBC_VERSION): "glibc 2.36".
    var buffer = [CChar](repeating: 0, count: 64)
    guard confstr(Int32(_CS_GNU_LIBC_VERSION), &buffer, buffer.count) > 0 else { return false }
    let text = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let parts = (text.split(separator: " ").last ?? "").split(separator: ".").compactMap { Int($0) }
    return parts.count >= 2 && (parts[0], parts[1]) >= (2, 36)
    #else
    return false
    #endif
}
